"""The served model never imports torch: loading it must stay light."""

from __future__ import annotations

import subprocess
import sys

SERVE_MODULES = (
    "mlflow_roofline.serve.pyfunc_entry",
    "mlflow_roofline.serve.placement_search",
    "mlflow_roofline.serve.ask_model",
    "mlflow_roofline.pyfunc_model",
)


def test_serving_imports_no_torch() -> None:
    code = "import sys\n" + "".join(f"import {m}\n" for m in SERVE_MODULES) + "print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "False", result.stderr
