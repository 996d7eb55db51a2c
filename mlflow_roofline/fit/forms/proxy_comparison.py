"""Would the paper's proxies alone have done as well as the complete ones?

Where the runs mix kinds (decoders, LoRA, checkpointing), the fit evaluates forms in the
complete proxies (:data:`fit.forms.catalog.COMPLETE_PROXY_FORMS`: OLS and roofline-shaped) beside the
paper's. This
compares the best of each family by the score the registration rule uses
(:func:`fit.forms.selection.score`: the worse of grouped-CV and extrapolation MAPE, %):
the paper's proxies *suffice* when their best score is within one standard error of the
complete proxies' best, the same 1-SE tolerance that chooses the registered form.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from mlflow_roofline.fit.forms.catalog import COMPLETE_PROXY_FORMS
from mlflow_roofline.fit.forms.fitted_form import FittedForm
from mlflow_roofline.fit.forms.selection import score


@dataclasses.dataclass(frozen=True)
class ProxyComparison:
    """The best form of each family and their scores (%, the worse of CV and extrapolation MAPE).

    Attributes:
        paper_form, complete_form: the best-scoring form in the paper's / the complete proxies.
        paper_cv_mape, complete_cv_mape: their grouped-CV MAPE, %.
        paper_score, complete_score: their scores, %; ``complete_se`` the standard error of the latter.
        suffices: True when the paper's best score is within one standard error of the complete best.
    """

    paper_form: str
    paper_cv_mape: float
    paper_score: float
    complete_form: str
    complete_cv_mape: float
    complete_score: float
    complete_se: float

    @property
    def suffices(self) -> bool:
        """The paper's proxies alone would have done as well (within one standard error)."""
        tolerance = self.complete_se if np.isfinite(self.complete_se) else 0.0
        return bool(self.paper_score <= self.complete_score + tolerance)

    def describe(self) -> str:
        """One sentence for the report."""
        head = (
            f"complete proxies (vocabulary head in C, optimizer bytes in M, the kinds as categoricals): "
            f"best {self.complete_form} cv_mape {self.complete_cv_mape:.3g}% (score {self.complete_score:.3g}%), "
            f"paper's proxies: best {self.paper_form} cv_mape {self.paper_cv_mape:.3g}% "
            f"(score {self.paper_score:.3g}%)"
        )
        if self.suffices:
            return head + ": the paper's proxies alone would have done as well"
        return head + f": the complete proxies predict better by {self.paper_score - self.complete_score:.3g} points"


def compare_proxies(forms: Mapping[str, FittedForm]) -> ProxyComparison | None:
    """The comparison of the two families among ``forms``; None where no complete-proxy form was scored."""
    scores = {name: score(fit) for name, fit in forms.items()}
    finite = {name: s for name, s in scores.items() if np.isfinite(s[0])}
    complete = [name for name in finite if name in COMPLETE_PROXY_FORMS]
    paper = [name for name in finite if name not in COMPLETE_PROXY_FORMS]
    if not complete or not paper:
        return None
    best_complete = min(complete, key=lambda name: finite[name][0])
    best_paper = min(paper, key=lambda name: finite[name][0])
    return ProxyComparison(
        paper_form=best_paper,
        paper_cv_mape=float(forms[best_paper].cv_mape),
        paper_score=finite[best_paper][0],
        complete_form=best_complete,
        complete_cv_mape=float(forms[best_complete].cv_mape),
        complete_score=finite[best_complete][0],
        complete_se=finite[best_complete][1],
    )
