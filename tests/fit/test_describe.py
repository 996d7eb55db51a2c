"""How a law is written for people: every exponent the law applies is in its formula."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mlflow_roofline.fit.forms.describe import power_law_formula, roofline_formula
from mlflow_roofline.law.roofline_efficiency import HardwareRooflineLaw, RooflineLaw


def test_a_per_step_law_shows_the_steps_exponent_its_job_totals_carry() -> None:
    """``paper_per_step`` is stored in job totals: E = kappa * C^a * M^b * steps^(1-a-b). Leaving the steps
    out of the formula would write a law whose twice-the-steps answer is not twice the joules."""
    terms = ["Intercept", "log_C", "log_steps", "log_M", "log_eta"]
    coef = [1.0, 0.4, 1.0 - 0.4 - 0.609, 0.609, -0.3]
    text = power_law_formula(terms, coef)
    exponents = dict(re.findall(r"(C|M|steps)<sup>([-\d.e]+)</sup>", text))
    assert exponents == {"C": "0.4", "steps": "-0.009", "M": "0.609"}
    assert float(exponents["C"]) + float(exponents["M"]) + float(exponents["steps"]) == pytest.approx(1.0)


def test_the_datasheet_roofline_is_written_as_board_power_times_roofline_time() -> None:
    terms, coef = ["eps_c", "eps_m", "e0"], [2.0, 3.0, 1e-6]
    cov = np.zeros((3, 3)).tolist()
    pooled = roofline_formula(HardwareRooflineLaw("f", terms, coef, cov, 0.01, 10.0))
    assert pooled.startswith("P · (2·(C)/F + 3·(M)/B + 1e-06·T)")
    assert roofline_formula(RooflineLaw("f", terms, coef, cov, 0.01, 10.0)).startswith("(2·C + 3·M + 1e-06·T)")


def test_the_datasheet_roofline_writes_its_vector_term_where_the_law_holds_one() -> None:
    terms, coef = ["eps_c", "eps_v", "eps_m", "e0"], [2.0, 0.5, 3.0, 1e-6]
    cov = np.zeros((4, 4)).tolist()
    pooled = roofline_formula(HardwareRooflineLaw("f", terms, coef, cov, 0.01, 10.0))
    assert pooled.startswith("P · (2·(C)/F + 0.5·(C)/F<sub>v</sub> + 3·(M)/B + 1e-06·T)")
