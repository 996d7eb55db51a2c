"""MLproject entry point `sweep`: passes its arguments to `mlflow-roofline sweep`."""

import sys

from mlflow_roofline.cli import main

if __name__ == "__main__":
    main(["sweep", *sys.argv[1:]])
