"""``python -m kernelbench.evaluation.worker``: how the parent starts every worker."""

from kernelbench.evaluation.worker.process import main

if __name__ == "__main__":
    main()
