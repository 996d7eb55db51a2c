"""MLproject entry point `train`: passes its arguments to `mlflow-roofline train`."""

import sys

from mlflow_roofline.cli import main

if __name__ == "__main__":
    main(["train", *sys.argv[1:]])
