"""Long training runs: progress lines (steps/s, metrics), checkpoints, resume.

    loop = attn.training.TrainingLoop(checkpoint="run.pt", checkpoint_every=200,
                                      model=model, optimizer=opt, data=generator)
    history = loop.run(steps, step_fn)      # step_fn(step) -> {"loss": ..., "acc": ...}

Every `checkpoint_every` steps, at the end, and when the process gets SIGINT (Ctrl-C)
or SIGTERM, the loop writes the state of everything it was given (modules and
optimizers via state_dict, torch.Generators via get_state), the step and the metric
history to `checkpoint` (atomically: a crash mid-write leaves the previous one). A new
loop with the same objects and `resume=True` continues from that step with the same
data stream, so an interrupted and resumed run computes what an uninterrupted one
would have. An interrupt raises `Interrupted` after the checkpoint is written.
"""

import os
import signal
import time

import torch

__all__ = ["TrainingLoop", "Interrupted"]


class Interrupted(Exception):
    """Raised by TrainingLoop.run after SIGINT/SIGTERM, once the checkpoint is saved."""


class TrainingLoop:
    def __init__(self, checkpoint=None, checkpoint_every=0, resume=False, log_every=100,
                 log=print, **state):
        if resume and not checkpoint:
            raise ValueError("resume=True needs a checkpoint path")
        for name, obj in state.items():
            if not (isinstance(obj, torch.Generator) or hasattr(obj, "state_dict")):
                raise TypeError(f"{name}: expected a module, an optimizer or a torch.Generator, "
                                f"got {type(obj).__name__}")
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every
        self.log_every = log_every
        self.log = log
        self.state = state
        self.step = 0
        self.history = []
        if resume:
            self._load()

    # -- checkpoints -----------------------------------------------------------------
    def _state_of(self, obj):
        return obj.get_state() if isinstance(obj, torch.Generator) else obj.state_dict()

    def save(self):
        blob = {"step": self.step, "history": self.history,
                "state": {name: self._state_of(obj) for name, obj in self.state.items()}}
        tmp = f"{self.checkpoint}.tmp"
        torch.save(blob, tmp)
        os.replace(tmp, self.checkpoint)

    def _load(self):
        if not os.path.exists(self.checkpoint):
            raise FileNotFoundError(f"resume: no checkpoint at {self.checkpoint}")
        blob = torch.load(self.checkpoint)
        missing = set(self.state) - set(blob["state"])
        if missing:
            raise KeyError(f"resume: checkpoint {self.checkpoint} has no state for "
                           f"{sorted(missing)} (it holds {sorted(blob['state'])})")
        for name, obj in self.state.items():
            saved = blob["state"][name]
            if isinstance(obj, torch.Generator):
                obj.set_state(saved)
            else:
                obj.load_state_dict(saved)
        self.step, self.history = blob["step"], blob["history"]
        if self.log:
            self.log(f"resumed from {self.checkpoint} at step {self.step}")

    # -- the loop --------------------------------------------------------------------
    def run(self, steps, step_fn):
        """Calls step_fn(step) for the remaining steps up to `steps`; returns the history,
        a list of {"step": n, **metrics}."""
        stop = []
        previous = {}

        def request_stop(signum, frame):
            stop.append(signum)

        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, request_stop)
        try:
            start_step, t0 = self.step, time.time()
            while self.step < steps and not stop:
                self.step += 1
                metrics = {k: float(v) for k, v in step_fn(self.step).items()}
                self.history.append({"step": self.step, **metrics})
                if self.log and (self.step % self.log_every == 0 or self.step == start_step + 1):
                    rate = (self.step - start_step) / max(time.time() - t0, 1e-9)
                    shown = "  ".join(f"{k} {v:.4f}" for k, v in metrics.items())
                    self.log(f"step {self.step:6d}/{steps}  {shown}  ({rate:.1f} steps/s)")
                if (self.checkpoint and self.checkpoint_every
                        and self.step % self.checkpoint_every == 0):
                    self.save()
            if self.checkpoint:
                self.save()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if stop:
            where = f"; checkpoint {self.checkpoint}" if self.checkpoint else ""
            raise Interrupted(f"interrupted at step {self.step}{where}")
        return self.history
