"""What training costs in memory: the weights, their gradients and the optimizer's state.

Training keeps, for every parameter, the weight itself, its gradient, and whatever the
optimizer stores per parameter: nothing for plain SGD, a momentum buffer for SGD with
momentum, two running averages for Adam (``exp_avg`` and ``exp_avg_sq``). In float32
that is 2, 3 and 4 copies of 4 bytes per parameter. Activations, saved by the forward
pass for the backward pass, come on top.

``copies`` says how many copies an optimizer keeps; ``count`` counts the bytes that a
model and its optimizer really hold after a step, from the tensors themselves;
``step_memory`` also asks the GPU's allocator (``torch.cuda.memory_allocated``) at each
stage of a step, where there is a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

MB = 10**6


def copies(optimizer: torch.optim.Optimizer) -> int:
    """Copies of the parameters that training with ``optimizer`` keeps: the weights, their
    gradients, and the optimizer's state per parameter (from PyTorch's documented
    algorithms: SGD's momentum buffer, Adam's two moments and AMSGrad's maximum)."""
    settings = optimizer.defaults
    if isinstance(optimizer, torch.optim.SGD):
        return 2 + (settings.get("momentum", 0) != 0)
    if isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):
        return 4 + bool(settings.get("amsgrad"))
    if isinstance(optimizer, torch.optim.RMSprop):
        return 3 + (settings.get("momentum", 0) != 0) + bool(settings.get("centered"))
    if isinstance(optimizer, torch.optim.Adagrad):
        return 3
    raise ValueError(
        f"copies: no rule for {type(optimizer).__name__}; count its state after "
        "a step with memory.count instead"
    )


def training_mb(parameters: int, copies: int, bytes_per_number: int = 4) -> float:
    """MB (10**6 bytes) for ``copies`` copies of ``parameters`` numbers."""
    return parameters * copies * bytes_per_number / MB


@dataclass(frozen=True)
class Counted:
    """Bytes that a model and its optimizer hold, counted from their tensors."""

    weights: int
    gradients: int
    state: int  # the optimizer's per-parameter tensors (momentum, moments...)
    counters: int  # Adam's step counters: one number per parameter tensor, not per parameter

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.state + self.counters

    def lines(self) -> list[str]:
        times = self.total / self.weights if self.weights else 0
        return [
            f"weights: {self.weights:,} bytes",
            f"gradients: {self.gradients:,} bytes",
            f"optimizer state: {self.state:,} bytes"
            + (f" (+ {self.counters:,} bytes of step counters)" if self.counters else ""),
            f"total: {self.total:,} bytes, {times:.2f} times the weights "
            "(counted from the tensors)",
        ]


def count(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Counted:
    """Counts the bytes of the weights, their gradients and the optimizer's state. Adam
    makes its state at the first step, so count after one."""
    params = list(model.parameters())
    weights = sum(_nbytes(p) for p in params)
    gradients = sum(_nbytes(p.grad) for p in params if p.grad is not None)
    state = counters = 0
    for per_param in optimizer.state.values():
        for name, value in per_param.items():
            if not isinstance(value, torch.Tensor):
                continue
            if name == "step":
                counters += _nbytes(value)
            else:
                state += _nbytes(value)
    return Counted(weights, gradients, state, counters)


def one_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    labels: torch.Tensor,
) -> None:
    optimizer.zero_grad()
    F.cross_entropy(model(inputs), labels).backward()
    optimizer.step()


@dataclass(frozen=True)
class StepMemory:
    """``torch.cuda.memory_allocated`` at each stage of a first training step (bytes,
    measured), with the same step's tensors counted; the allocator figures are None
    without a GPU."""

    counted: Counted
    device: str
    parameters: int
    batch_size: int
    before: int | None = None
    after_model: int | None = None
    after_forward: int | None = None
    after_backward: int | None = None
    after_step: int | None = None

    def lines(self) -> list[str]:
        head = [f"a network of {self.parameters:,} parameters, batch {self.batch_size}, Adam"]
        if self.before is None:
            return (
                head
                + self.counted.lines()
                + [
                    "No GPU here, so no allocator to ask: the figures are counted from the "
                    "tensors. On a GPU this cell also reads torch.cuda.memory_allocated()."
                ]
            )
        weights = self.after_model - self.before
        return head + [
            f"the weights: {weights / MB:.2f} MB (measured)",
            f"the forward pass: +{(self.after_forward - self.after_model) / MB:.2f} MB "
            "(activations saved for backward, and the loss; measured)",
            f"after backward: {(self.after_backward - self.after_model) / MB:+.2f} MB on the "
            "weights (the gradients came, the saved activations went; measured)",
            f"the optimizer's first step: +{(self.after_step - self.after_backward) / MB:.2f} MB "
            "(Adam's state; measured)",
            f"weights, gradients and state: {(self.after_step - self.before) / MB:.2f} MB "
            f"measured, {self.counted.total / MB:.2f} MB counted from the tensors, "
            f"{self.counted.total / self.counted.weights:.2f} times the weights",
        ]


def step_memory(device: str, hidden: int = 1024, batch_size: int = 3072) -> StepMemory:
    """One Adam step of ``make_network(hidden=...)`` on ``device``. On a GPU the allocator
    is read after each stage (the data set is made first, so it is not counted)."""
    from .training import make_network, parameter_count, spirals

    inputs, labels = spirals(points=batch_size, device=device)
    gpu = device == "cuda"
    read = torch.cuda.memory_allocated if gpu else (lambda: None)
    if gpu:
        torch.cuda.synchronize()
    before = read()
    model = make_network(hidden=hidden, device=device)
    optimizer = torch.optim.Adam(model.parameters())
    after_model = read()
    loss = F.cross_entropy(model(inputs), labels)
    after_forward = read()
    loss.backward()
    del loss
    after_backward = read()
    optimizer.step()
    after_step = read()
    return StepMemory(
        count(model, optimizer),
        str(device),
        parameter_count(model),
        len(labels),
        before,
        after_model,
        after_forward,
        after_backward,
        after_step,
    )


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def peak_memory(device: str, hidden: int = 1024, batch_size: int = 3072) -> str:
    """On a GPU: the peak that one Adam step of ``make_network(hidden=...)`` allocates, the
    memory it holds after the step, and what the caching allocator keeps reserved, all
    measured. Without a GPU, says what it would show."""
    if device != "cuda":
        return (
            "No GPU here, so no allocator to ask. On a GPU this cell measures the peak "
            "of one Adam step (the activations alive at once), what the step leaves "
            "allocated, and what PyTorch's caching allocator keeps reserved."
        )
    from .training import make_network, spirals

    inputs, labels = spirals(points=batch_size, device=device)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    model = make_network(hidden=hidden, device=device)
    optimizer = torch.optim.Adam(model.parameters())
    one_step(model, optimizer, inputs, labels)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - start
    held = torch.cuda.memory_allocated() - start
    return (
        f"one Adam step, batch {len(labels):,}: peak {peak / MB:.2f} MB, held after the "
        f"step {held / MB:.2f} MB, reserved by the caching allocator "
        f"{torch.cuda.memory_reserved() / MB:.2f} MB in all (measured)"
    )
