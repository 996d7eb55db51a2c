"""The recommendation as printed: one line for choices the law cannot tell apart, extrapolations marked."""

from __future__ import annotations

from mlflow_roofline.serve.ask_model import format_recommendation


def _choice(prefix: str, strategy: str, n: int, energy: float, spread: float, time_s: float, extrap: bool) -> dict:
    return {
        f"{prefix}strategy": strategy,
        f"{prefix}num_devices": n,
        f"{prefix}energy_j": energy,
        f"{prefix}energy_j_lower": energy * (1 - spread),
        f"{prefix}energy_j_upper": energy * (1 + spread),
        f"{prefix}time_s": time_s,
        f"{prefix}extrapolated": extrap,
    }


def _record(green: tuple, fast: tuple) -> dict:
    return {
        "objective": "energy",
        "candidates": 12,
        **_choice("", *green),
        **_choice("energy_optimal_", *green),
        **_choice("time_optimal_", *fast),
    }


def test_choices_within_each_others_interval_are_one_tie_and_an_extrapolation_is_marked() -> None:
    text = format_recommendation(
        _record(("ddp", 2, 810_793.8219, 0.2, 40.0, False), ("ddp", 8, 810_793.8221, 0.2, 11.0, True))
    )
    rows = text.splitlines()
    # the measured choice is shown, the faster extrapolated one named
    assert rows[1].startswith("best (energy) = energy-optimal = time-optimal  ddp       2 ")
    assert len([r for r in rows if "ddp" in r and " .. " in r]) == 1  # one line for the three
    assert "tie: ddp x8 and ddp x2 use the same energy within each other's 95% interval" in text
    assert "ddp x2 is shown (within the measured ranges)" in text and "*" not in text
    both = format_recommendation(
        _record(("ddp", 2, 810_793.8219, 0.2, 40.0, False), ("ddp", 8, 810_793.8221, 0.2, 11.0, False))
    )
    assert "ddp x2 and ddp x8 use the same energy" in both and "ddp x8 is shown (the faster)" in both
    beyond = format_recommendation(_record(("ddp", 3, 1000.0, 0.05, 40.0, True), ("ddp", 4, 1500.0, 0.05, 25.0, True)))
    assert "3 *" in beyond and "* extrapolated: beyond the device counts or sizes" in beyond
    assert "faster is not greener" not in text


def test_distinct_choices_stay_apart_with_the_trade_off_said() -> None:
    text = format_recommendation(_record(("ddp", 2, 1000.0, 0.05, 40.0, False), ("ddp", 4, 1500.0, 0.05, 25.0, False)))
    rows = text.splitlines()
    assert rows[1].startswith("best (energy) = energy-optimal") and rows[2].startswith("time-optimal")
    assert "faster is not greener here: the fastest choice uses 1.50x the energy" in text
    assert "tie:" not in text and "*" not in text


def test_a_decoder_answer_says_why_it_equals_or_differs_from_the_encoders() -> None:
    from mlflow_roofline.serve.ask_model import kind_line

    same = kind_line("decoder", 812.0, 812.0, {"form": "paper_per_step"})
    assert "equals an encoder's of the same sizes" in same and "`paper_per_step` has no term" in same
    more = kind_line("decoder", 1218.0, 812.0, {"form": "complete"})
    assert more.startswith("arch: 1.5x the energy of an encoder") and "`complete` counts what differs" in more
