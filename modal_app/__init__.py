"""The Modal app: images, GPU functions and ``modal run`` entry points for kernelbench.

Everything that decides a verdict lives in ``kernelbench``; this package only ships jobs to a
container with the right GPU and hands them to the same evaluation entry point the local runner
calls. Start with ``modal run modal_app/app.py::evaluate_kernel --help``.
"""
