"""A train job's running energy handed from its ranks to the launcher: the files, their merge over ranks."""

from __future__ import annotations

import json
from pathlib import Path

from mlflow_roofline.energy import make_meter
from mlflow_roofline.energy.live import LiveEnergy
from mlflow_roofline.train.live_energy import LIVE_FILE, LiveFiles, LivePublisher


def append(path: Path, text: str) -> None:
    with open(path, "a") as file:
        file.write(text)


def line(t: float, joules: dict[str, float]) -> str:
    return json.dumps({"t": t, "source": "estimate", "j": joules}) + "\n"


def test_each_new_line_is_a_reading_summed_over_the_ranks(tmp_path: Path) -> None:
    rank0, rank1 = (tmp_path / LIVE_FILE.format(rank=r) for r in (0, 1))
    files = LiveFiles(tmp_path)
    assert files.take() == [] and files.source is None  # no rank has published yet
    append(rank0, line(10.0, {"cpu": 0.0}))
    append(rank1, line(10.5, {"cpu": 0.0}) + line(12.5, {"cpu": 4.0}))
    append(rank0, line(12.0, {"cpu": 3.0}) + '{"t": 14.0, "sou')  # a line still being written
    assert files.take() == [(10.0, {"cpu": 0.0}), (10.5, {"cpu": 0.0}), (12.0, {"cpu": 3.0}), (12.5, {"cpu": 7.0})]
    assert files.source == "estimate"
    append(rank0, 'rce": "estimate", "j": {"cpu": 5.0}}\n')  # its end: now complete
    assert files.take() == [(14.0, {"cpu": 9.0})]
    assert files.take() == []


def test_a_rank_publishes_the_opening_when_due_and_the_windows_own_close(tmp_path: Path) -> None:
    meter = make_meter("estimate", device="cpu")
    live = LiveEnergy(meter, "train")
    path = tmp_path / LIVE_FILE.format(rank=0)
    publisher = LivePublisher(live, path, interval_s=3600.0)
    live.begin()
    publisher.publish(force=True)  # the opening
    publisher.publish()  # a step's end, long before the interval: nothing
    measurement = live.end()
    publisher.publish(force=True)  # the close
    publisher.close()
    meter.close()
    records = [json.loads(text) for text in path.read_text().splitlines()]
    assert len(records) == 2 and all(r["source"] == "estimate" for r in records)
    assert records[0]["j"]["cpu"] <= records[1]["j"]["cpu"] == measurement.per_device_j["cpu"]
