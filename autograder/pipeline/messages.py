"""The grading kernel's messages, read by the one strict reader (``kernel/wire.py``) [trusted]

The learner's code runs in the kernel and holds its session's key, so every message it sends
(on iopub, shell, control) is the learner's to write, signature and all: ``k.session.send(
k.iopub_socket, "display_data", content=b"...")`` sends any bytes as the content. jupyter_client
reads them with Python's ``json`` (``NaN``, ``Infinity``, nesting to the stack's depth) and
then meets them with ``header["msg_id"]``, ``parent_header.get(...)``, ``content["status"]``;
an exception there escapes nbclient and ends nbgrader's autograde of the notebook.

``KernelSession`` is the session of the grader's kernel client. It reads each part of a
message with ``wire.loads`` (its depth, values and numbers; its size bound is the client's
``data_limit``, since a displayed image is legitimately megabytes) and checks the shape the
readers after it rely on: four dicts, a text ``msg_type`` and ``msg_id``, a reply's text
``status``. A message that fails becomes ``unread``: a line on the cell's stderr saying that
a message was dropped and why, as a reply of its own type (``status: error``) where it was a
reply; one whose parent cannot be read is dropped unseen (nobody waits for it).
"""
from __future__ import annotations

from jupyter_client.session import Session
from traitlets import Integer, default

from autograder.kernel import wire
from autograder.kernel.hints import shorten

DATA_LIMIT = 64_000_000  # characters of data one cell may display (images), and of one message
UNREAD = "[the grader dropped a message from the kernel that it could not read: {}]\n"


def _text(data: bytes | str) -> str:
    # jupyter_client's own reading of bytes that are not UTF-8 (a learner's lone surrogate)
    return data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")


class KernelSession(Session):
    """A ``Session`` that reads what the kernel sends as untrusted data (see the module doc)."""

    max_bytes = Integer(DATA_LIMIT, help="Characters of one part of one message.")

    @default("unpack")
    def _strict_unpack(self):
        return lambda data: wire.loads(_text(data), self.max_bytes)

    def deserialize(self, msg_list, content: bool = True, copy: bool = True) -> dict:
        """The message in ``msg_list`` (its frames after the identities), or ``unread``'s note."""
        try:
            msg = super().deserialize(msg_list, content=content, copy=copy)
            shape = _shape(msg, content)
        except Exception as err:  # noqa: BLE001 (wire's Unreadable, or jupyter_client's own readers')
            shape = why(err)
            msg = None
        return msg if shape is None else self.unread(msg_list, shape)

    def unread(self, msg_list, reason: str) -> dict:
        """The note that stands for a message the grader could not read: a stderr line in the
        cell that sent it, or a reply with ``status: error`` where it was a reply; seen by no
        one (no parent) where the parent it names cannot be read."""
        header, parent = (self._part(msg_list, n) for n in (1, 2))
        reply = str(header.get("msg_type")).endswith("_reply")
        kind = header["msg_type"] if reply else "stream"
        content = ({"status": "error", "ename": "UnreadMessage", "evalue": UNREAD.format(reason).strip(),
                    "traceback": [], "execution_count": None, "payload": []} if reply
                   else {"name": "stderr", "text": UNREAD.format(reason)})
        parent_id = parent.get("msg_id")
        return {"header": {"msg_id": "", "msg_type": kind}, "msg_id": "", "msg_type": kind,
                "parent_header": {"msg_id": parent_id} if isinstance(parent_id, str) else {},
                "metadata": {}, "content": content, "buffers": []}

    def _part(self, msg_list, n: int) -> dict:
        """Frame ``n`` of ``msg_list``, read as a dict; ``{}`` where it cannot be."""
        try:
            part = self.unpack(bytes(getattr(msg_list[n], "bytes", msg_list[n])))
        except Exception:  # noqa: BLE001 (too few frames, or one wire does not read)
            return {}
        return part if isinstance(part, dict) else {}


def why(err: Exception) -> str:
    """``err`` in one short line, for ``UNREAD``."""
    return shorten(f"{type(err).__name__}: {(str(err).splitlines() or [''])[0]}", 200)


def _shape(msg: dict, content: bool) -> str | None:
    """What in ``msg`` the readers after the session cannot read, or None."""
    parts = ("header", "parent_header", "metadata") + (("content",) if content else ())
    odd = [part for part in parts if not isinstance(msg.get(part), dict)]
    if odd:
        return f"its {odd[0]} is not a mapping"
    if not all(isinstance(msg.get(k), str) for k in ("msg_id", "msg_type")):
        return "its header has no text msg_id and msg_type"
    if content and msg["msg_type"].endswith("_reply") and not isinstance(msg["content"].get("status"), str):
        return "a reply without a status"
    return None
