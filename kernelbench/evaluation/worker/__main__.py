"""``python -m kernelbench.evaluation.worker``: how the parent starts every worker (``--template``: a reference
template, ``template.py``)."""

import sys

if __name__ == "__main__":
    if "--template" in sys.argv[1:]:
        from kernelbench.evaluation.worker.template import main
    else:
        from kernelbench.evaluation.worker.process import main
    main()
