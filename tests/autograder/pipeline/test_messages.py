"""The grading kernel's messages are read as untrusted data (``autograder/pipeline/messages.py``)."""
from __future__ import annotations

import json

import nbformat
import pytest
from jupyter_client.session import Session

from autograder.kernel import wire
from autograder.pipeline.messages import DATA_LIMIT, KernelSession
from helpers import SOLUTIONS, grade, with_cells

SOLUTION = SOLUTIONS / "00_start_here" / "start_here.ipynb"
KEY = b"k" * 32
PARENT = {"msg_id": "request-1", "msg_type": "execute_request"}


def frames(content: bytes, msg_type: str = "display_data", header: bytes | None = None) -> list[bytes]:
    """The frames a kernel holding the session's key sends: signed, with ``content`` as it is."""
    kernel = Session(key=KEY)
    parts = [header or json.dumps(kernel.msg_header(msg_type), default=str).encode(),
             json.dumps(PARENT).encode(), b"{}", content]
    return [kernel.sign(parts), *parts]


def read(msg_list: list[bytes]) -> dict:
    return KernelSession(key=KEY).deserialize(msg_list)


def test_an_honest_message_is_read_as_it_was_sent():
    msg = read(frames(b'{"data": {"text/plain": "1.5"}, "metadata": {}}'))
    assert (msg["msg_type"], msg["content"]) == ("display_data", {"data": {"text/plain": "1.5"}, "metadata": {}})


def test_a_displayed_image_larger_than_a_line_of_the_wire_is_read():
    """The size bound of this path is the client's data limit, not ``wire.MAX_BYTES``."""
    image = "A" * (wire.MAX_BYTES + 1000)
    assert len(image) < DATA_LIMIT
    msg = read(frames(json.dumps({"data": {"image/png": image}, "metadata": {}}).encode()))
    assert msg["content"]["data"]["image/png"] == image


UNREADABLE = {
    "NaN": b'{"data": {"application/json": {"v": NaN}}, "metadata": {}}',
    "Infinity": b'{"data": {"text/plain": "x"}, "metadata": {"width": Infinity}}',
    "5000 deep": b'{"data": {"application/json": ' + b"[" * 5000 + b"]" * 5000 + b'}, "metadata": {}}',
    "a list for content": b"[1, 2]",
    "an integer of 400 digits": b'{"data": {}, "metadata": {}, "execution_count": ' + b"9" * 400 + b"}",
    "not JSON": b'{"data": ',
}


@pytest.mark.parametrize("content", UNREADABLE.values(), ids=list(UNREADABLE))
def test_an_unreadable_message_is_a_line_on_its_cells_stderr(content):
    msg = read(frames(content))
    assert msg["msg_type"] == "stream" and msg["parent_header"] == {"msg_id": "request-1"}
    assert msg["content"]["name"] == "stderr" and "could not read" in msg["content"]["text"]


def test_a_reply_without_a_status_is_an_error_reply():
    """nbclient reads ``content["status"]`` of the cell's reply: a KeyError there ended the grading."""
    msg = read(frames(b"{}", msg_type="execute_reply"))
    assert (msg["msg_type"], msg["content"]["status"]) == ("execute_reply", "error")
    assert msg["parent_header"] == {"msg_id": "request-1"}


@pytest.mark.parametrize("header", [b'{"msg_id": NaN}', b'{"msg_type": "stream"}',
                                    b'{"msg_id": "1", "msg_type": "stream", "version": 5}'])
def test_a_header_the_grader_cannot_read_is_said_in_the_cell_it_names(header):
    msg = read(frames(b'{"name": "stdout", "text": "x"}', header=header))
    assert msg["msg_type"] == "stream" and "could not read" in msg["content"]["text"]
    assert msg["parent_header"] == {"msg_id": "request-1"}


def test_a_message_whose_parent_cannot_be_read_is_seen_by_no_one():
    kernel = Session(key=KEY)
    parts = [json.dumps(kernel.msg_header("stream"), default=str).encode(), b"[NaN]", b"{}", b"{}"]
    assert read([kernel.sign(parts), *parts])["parent_header"] == {}


# --- through the grader ----------------------------------------------------------------------
SEND = "k = get_ipython().kernel\n"
HOSTILE = {  # a learner's own cell, sending raw bytes with the kernel's session (and key)
    "a NaN in a display": SEND + "k.session.send(k.iopub_socket, 'display_data', parent=k.get_parent(),\n"
                                 "               content=b'{\"data\": {\"text/plain\": NaN}, \"metadata\": {}}');\n",
    "a display 5000 deep": SEND + "k.session.send(k.iopub_socket, 'display_data', parent=k.get_parent(),\n"
                                  "               content=b'{\"data\": {\"application/json\": ' + b'[' * 5000\n"
                                  "               + b']' * 5000 + b'}, \"metadata\": {}}');\n",
    "content that is a list": SEND + "k.session.send(k.iopub_socket, 'display_data', content=b'[1]',\n"
                                     "               parent=k.get_parent());\n",
    "a display whose text is numbers": SEND + "k.session.send(k.iopub_socket, 'display_data', parent=k.get_parent(),\n"
                                              "               content=b'{\"data\": {\"text/plain\": [1, 2]}, \"metadata\": {}}');\n",
    "a header with a NaN": SEND + "import json\n"
                                  "k.session.send_raw(k.iopub_socket, [b'{\"msg_id\": NaN}',\n"
                                  "    json.dumps(k.get_parent()['header'], default=str).encode(), b'{}', b'{}'])\n",
    "a reply without a status": SEND + "k.session.send(k.shell_stream, 'execute_reply', content=b'{}',\n"
                                       "               parent=k.get_parent(), ident=k._parent_ident['shell'])\n",
}


@pytest.mark.parametrize("cell", HOSTILE.values(), ids=list(HOSTILE))
def test_a_message_the_grader_cannot_read_costs_nothing(tmp_path, cell):
    """Each ended nbgrader's autograde of the notebook (a traceback, no grade) before the
    kernel's messages were read strictly; now both exercises keep their points, the cell after
    runs, and the cell says what was dropped (a reply's note is its own, shown nowhere)."""
    result = grade(with_cells(SOLUTION, "grade_warmup_softmax", [cell, "print('the next cell ran')"], tmp_path))
    assert result.total == result.max_total == 4, [e.messages for e in result.exercises]
    cells = json.loads(result.autograded)["cells"]
    at = next(i for i, c in enumerate(cells) if "".join(c["source"]) == cell)
    said = [json.dumps(c["outputs"]) for c in cells[at:at + 2]]
    assert "the next cell ran" in said[1]
    assert "could not read" in said[0] or "reply" in cell, said[0]
    assert "NaN" not in said[0].replace("NaN is not", ""), said[0]


COUNT = '<img src=x id=count onerror="__xss=9">'


def test_an_execution_count_and_a_stream_name_of_the_kernels_making_are_not_shown(tmp_path):
    """nbclient copies a message's ``execution_count`` into the cell unchecked: text there ended
    the grading (nbconvert checks the notebook after each step), and the pages write it as it is
    (``In [...]``); a stream may name itself anything (``sanitize.readable``)."""
    from autograder.grading import grade_notebook

    send = ("k = get_ipython().kernel\n"
            "k.session.send(k.iopub_socket, 'display_data', parent=k.get_parent(), content={'data': {'text/plain': 'x'},\n"
            f"               'metadata': {{}}, 'execution_count': {COUNT!r}}})\n"
            "k.session.send(k.iopub_socket, 'stream', parent=k.get_parent(), content={'name': '<b>', 'text': 'y'});\n")
    path = with_cells(SOLUTION, "grade_warmup_softmax", [send], tmp_path)
    result = grade_notebook(path, feedback_to=tmp_path / "feedback.html")
    assert result.total == result.max_total == 4, [e.messages for e in result.exercises]
    assert "<img src=x id=count" not in (tmp_path / "feedback.html").read_text()  # in the source, escaped
    cell = next(c for c in nbformat.reads(result.autograded, as_version=4).cells if c.source == send)
    assert type(cell.execution_count) in (int, type(None)), cell.execution_count
    assert "a stream named '<b>'" in cell.outputs[-1].text, cell.outputs
