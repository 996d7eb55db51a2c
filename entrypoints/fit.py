"""MLproject entry point `fit`: passes its arguments to `mlflow-roofline fit`."""

import os
import sys

from mlflow_roofline.cli import main
from mlflow_roofline.core.invocation import ENV_INVOCATION, MLPROJECT

if __name__ == "__main__":
    os.environ[ENV_INVOCATION] = MLPROJECT  # messages name options as `-P name=value`
    main(["fit", *sys.argv[1:]])
