"""Tiny user training jobs for the integration tests: a Trainer job and a hand-written Accelerate loop.

Built from configs (no hub download), on generated tokens, on CPU. Imported by the tests
and launched by them under ``accelerate launch``::

    accelerate launch --multi_gpu --num_processes 2 tests/integration_jobs.py trainer OUT_JSON
    accelerate launch --use_fsdp --fsdp_version 2 --num_processes 2 tests/integration_jobs.py loop OUT_JSON

The main process writes the MLflow run id it logged to into OUT_JSON. ``interrupt``, ``raise``
and ``stall`` (one process, ``python tests/integration_jobs.py stall OUT_JSON [FLAGS]``) stop a
Trainer job at step 4: by a KeyboardInterrupt, a ValueError, or by sleeping until the test
kills the process; ``--autolog`` measures it by ``mlflow_roofline.autolog()``, ``--nested`` runs
it inside the user's two nested runs, ``--ctrl-c-at-flush=N`` presses Ctrl-C N more times in
the flush of MLflow's asynchronous logging that ending a run begins with.
"""

from __future__ import annotations

import faulthandler
import json
import sys
from typing import Any

import torch

SEQ_LEN = 16
VOCAB = 100
HANG_S = 300
"""Seconds after which a launched rank (the jobs take about 20 s) prints every thread's stack to stderr and exits 1:
a rank that hangs (a gloo teardown once did, under CI load) fails its test with where it hung, not with a bare
timeout of the launcher whose output is lost."""


class TokenData(torch.utils.data.Dataset):
    """``n`` rows of ``seq_len`` random tokens and a binary label (same rows for a seed)."""

    def __init__(self, n: int, seq_len: int = SEQ_LEN, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, VOCAB, (n, seq_len), generator=generator)
        self.labels = torch.randint(0, 2, (n,), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class NextTokenData(TokenData):
    """:class:`TokenData` for a causal LM: the labels are the tokens (the model shifts them)."""

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def tiny_bert() -> torch.nn.Module:
    """BERT classifier, L=2, d=32, h=2, ff=64."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    return BertForSequenceClassification(
        BertConfig(
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
        )
    )


def tiny_gpt2() -> torch.nn.Module:
    """GPT-2 classifier, L=2, d=32, h=4, ff = 4d (``n_inner`` left at None)."""
    from transformers import GPT2Config, GPT2ForSequenceClassification

    torch.manual_seed(0)
    return GPT2ForSequenceClassification(
        GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64, pad_token_id=0)
    )


def run_trainer(
    model: torch.nn.Module,
    callback: Any,
    *,
    max_steps: int,
    logging_steps: int = 2,
    report_to: list[str] | None = None,
    batch: int = 4,
    output_dir: str = "trainer-out",
    dataset: torch.utils.data.Dataset | None = None,
    after: list[Any] | None = None,
) -> Any:
    """Train ``model`` with the Hugging Face Trainer and ``callback`` (None: none), then the
    callbacks ``after`` it, on ``dataset`` (by default :class:`TokenData` of 400 rows); return
    the Trainer's state."""
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(
        output_dir,
        max_steps=max_steps,
        per_device_train_batch_size=batch,
        logging_steps=logging_steps,
        report_to=report_to or [],
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=TokenData(400) if dataset is None else dataset,
        callbacks=([] if callback is None else [callback]) + (after or []) or None,
    )
    trainer.train()
    return trainer.state


def _trainer_job() -> str | None:
    from mlflow_roofline.integrations.transformers import RooflineCallback

    callback = RooflineCallback(meter="estimate", warmup_steps=2, forecast_after_steps=4, experiment="launched")
    run_trainer(tiny_bert(), callback, max_steps=10)
    return callback.tracker.run.run_id if callback.tracker.run else None


def _loop_job() -> str | None:
    from accelerate import Accelerator

    from mlflow_roofline.integrations.accelerate import track_training

    accelerator = Accelerator(cpu=True)
    model = tiny_bert()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.utils.data.DataLoader(TokenData(200), batch_size=4)
    model, optimizer, data = accelerator.prepare(model, optimizer, data)
    with track_training(
        accelerator,
        model,
        total_steps=10,
        logging_steps=2,
        meter="estimate",
        warmup_steps=2,
        forecast_after_steps=4,
        experiment="launched",
    ) as tracker:
        for step, batch in enumerate(data):
            accelerator.backward(model(**batch).loss)
            optimizer.step()
            optimizer.zero_grad()
            if tracker.step() or step + 1 >= 10:
                break
    # As Accelerate asks of every script: without it the process group outlives the job, and
    # gloo's threads can abort a rank (SIGABRT) at the interpreter's exit after all went well.
    accelerator.end_training()
    run = tracker.tracker.run
    return run.run_id if run else None


def _stopped_trainer_job(how: str, out: str, *, autolog: bool = False, nested: bool = False) -> None:
    """A Trainer job that stops at step 4: ``interrupt`` raises KeyboardInterrupt (under
    ``report_to="mlflow"`` unless ``nested``), ``raise`` a ValueError, ``stall`` prints ``stalled``
    and sleeps until it is killed. The ids of the runs it logs to go to ``out`` first (``run_id``,
    and ``parent_id`` when ``nested``).

    ``autolog``: measured by ``mlflow_roofline.autolog()`` instead of an explicit callback;
    ``nested``: inside the user's ``with mlflow.start_run(): with mlflow.start_run(nested=True):``.
    """
    import contextlib
    import time

    import mlflow
    from transformers import Trainer, TrainerCallback, TrainingArguments

    import mlflow_roofline
    from mlflow_roofline.integrations.transformers import RooflineCallback

    options = {"meter": "estimate", "warmup_steps": 1, "forecast_after_steps": 2}
    if autolog:
        mlflow_roofline.autolog(silent=True, **options)
    ours = [] if autolog else [RooflineCallback(**options)]

    class Stop(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step < 4:
                return
            runs = [run.info.run_id for run in [mlflow.active_run()] if run is not None]
            if not nested:
                roofline = next(c for c in trainer.callback_handler.callbacks if isinstance(c, RooflineCallback))
                assert roofline.tracker is not None and roofline.tracker.run is not None
                runs = [roofline.tracker.run.run_id]
            with open(out, "w") as f:
                json.dump({"run_id": runs[-1], "parent_id": parent.info.run_id if nested else None}, f)
            if how == "interrupt":
                raise KeyboardInterrupt
            if how == "raise":
                raise ValueError("the data ran out")
            print("stalled", flush=True)
            time.sleep(600)

    args = TrainingArguments(
        "trainer-out",
        max_steps=20,
        per_device_train_batch_size=4,
        logging_steps=2,
        report_to=["mlflow"] if how == "interrupt" and not nested else [],
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = Trainer(model=tiny_bert(), args=args, train_dataset=TokenData(200), callbacks=[*ours, Stop()])
    with mlflow.start_run() if nested else contextlib.nullcontext() as parent:
        with mlflow.start_run(nested=True) if nested else contextlib.nullcontext():
            trainer.train()


def _ctrl_c_at_flush(times: int) -> None:
    """The user presses Ctrl-C ``times`` more times, in a row, while MLflow's asynchronous logging is
    shut down (the flush that ending a run begins with): real SIGINTs raised there, all that are left
    at each flush."""
    import signal

    from mlflow.store.tracking.abstract_store import AbstractStore

    shut_down = AbstractStore.shut_down_async_logging
    left = [times]

    def interrupted(self: AbstractStore) -> None:
        while left[0] > 0:
            left[0] -= 1
            signal.raise_signal(signal.SIGINT)
        shut_down(self)

    AbstractStore.shut_down_async_logging = interrupted  # type: ignore[method-assign]


if __name__ == "__main__":
    kind, out, *flags = sys.argv[1:]
    if kind in ("interrupt", "stall", "raise"):
        for flag in flags:
            if flag.startswith("--ctrl-c-at-flush="):
                _ctrl_c_at_flush(int(flag.split("=")[1]))
        _stopped_trainer_job(kind, out, autolog="--autolog" in flags, nested="--nested" in flags)
        sys.exit(0)
    faulthandler.dump_traceback_later(HANG_S, exit=True)
    run_id = _trainer_job() if kind == "trainer" else _loop_job()
    if run_id is not None:
        with open(out, "w") as f:
            json.dump({"run_id": run_id}, f)
