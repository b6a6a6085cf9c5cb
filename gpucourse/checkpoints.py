"""Checkpoints in memory: a model's ``state_dict`` saved with ``torch.save`` into an
``io.BytesIO``, as if to a file, and one saved on a GPU, to load on a CPU-only machine.

``torch.save`` records, for each tensor, the device its data was on ("cpu", "cuda:0").
``torch.load`` puts the data back on that device unless ``map_location`` says otherwise,
so a checkpoint saved on a GPU fails to load where there is none.
"""

from __future__ import annotations

import io
import zipfile

import torch


def save_state(model: torch.nn.Module) -> io.BytesIO:
    """``torch.save(model.state_dict(), buffer)``, the buffer rewound, ready to load."""
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    return buffer


def saved_on_gpu(model: torch.nn.Module) -> io.BytesIO:
    """The model's ``state_dict`` as ``torch.save`` writes it on a GPU.

    With a GPU, that is what happens: the tensors are copied to ``cuda:0`` and saved.
    Without one, the CPU tensors are saved and the device that the file records for each
    of them is rewritten from "cpu" to "cuda:0", the one place where the two files differ
    (``torch.save`` pickles the device as a string beside each tensor's data).
    """
    state = model.state_dict()
    if torch.cuda.is_available():
        buffer = io.BytesIO()
        torch.save({name: t.to("cuda:0") for name, t in state.items()}, buffer)
        buffer.seek(0)
        return buffer
    return _recorded_device(save_state(model), "cpu", "cuda:0")


def _recorded_device(buffer: io.BytesIO, old: str, new: str) -> io.BytesIO:
    # torch.save's pickle (protocol 2) writes each device as BINUNICODE: b"X", its length
    # as 4 little-endian bytes, then the text. Swapping one such string for another keeps
    # the pickle valid; nothing else in the file depends on its length.
    def binunicode(text: str) -> bytes:
        raw = text.encode()
        return b"X" + len(raw).to_bytes(4, "little") + raw

    out = io.BytesIO()
    with zipfile.ZipFile(buffer) as source, zipfile.ZipFile(out, "w") as target:
        for entry in source.infolist():
            data = source.read(entry)
            if entry.filename.endswith("/data.pkl"):
                if binunicode(old) not in data:
                    raise ValueError(f"this checkpoint records no tensor on {old!r}")
                data = data.replace(binunicode(old), binunicode(new))
            target.writestr(entry, data)
    out.seek(0)
    return out
