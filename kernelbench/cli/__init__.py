"""The ``kernelbench`` command: one module per verb, registered in ``main.COMMANDS``."""
