"""MLproject entry point `train`: passes its arguments to `mlflow-roofline train`."""

import os
import sys

from mlflow_roofline.cli import main
from mlflow_roofline.core.invocation import ENV_INVOCATION, MLPROJECT

if __name__ == "__main__":
    os.environ[ENV_INVOCATION] = MLPROJECT  # messages name options as `-P name=value`
    main(["train", *sys.argv[1:]])
