"""MLproject entry point `fit`: passes its arguments to `mlflow-roofline fit`."""

import sys

from mlflow_roofline.cli import main

if __name__ == "__main__":
    main(["fit", *sys.argv[1:]])
