"""OpenAI's Responses API (``POST /v1/responses``, Codex CLI's wire format) seen as chat messages.

The compressor works on chat-completions messages.  A Responses request
carries the same conversation as a list of *input items*; each item maps to
exactly one chat message, so message ``i`` of the view is input item ``i``
and a changed message maps straight back:

* ``{"role": ..., "content": ...}`` (``type: "message"`` or none) -> the same
  role, ``input_text`` / ``output_text`` parts as ``text`` parts;
* ``function_call`` / ``custom_tool_call`` / ``local_shell_call`` -> an
  assistant message with one tool call (its ``call_id``, name, arguments);
* ``function_call_output`` / ``custom_tool_call_output`` /
  ``local_shell_call_output`` -> a ``tool`` message answering that call; an
  output that is a JSON envelope around a command's text (Codex's structured
  shell output) -> that text as the message's text, the envelope kept beside
  it and wrapped back around the text forwarded (:mod:`.tool_output`);
* anything else (``reasoning``, web search calls, ...) -> an opaque message
  the compressor never touches but still uses to tell turns apart.

``instructions`` play the system prompt's part (they name the conversation).
With ``previous_response_id`` the earlier turns live at the provider; only the
items the request carries can be compressed.
"""

from __future__ import annotations

import json

from .tool_output import json_envelope

_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
_ENVELOPE = "x-json-envelope"  # the view's part holding an output's JSON envelope as sent


def chat_view(body: dict) -> dict | None:
    """A chat-completions body standing for ``body``'s conversation; None if it has no input items."""
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        return None
    view = {"model": body.get("model"), "messages": [_as_message(it) for it in items]}
    if body.get("instructions") is not None:
        view["system"] = body.get("instructions")
    if body.get("tools") is not None:
        view["tools"] = body.get("tools")
    return view


def _as_message(item) -> dict:
    if not isinstance(item, dict):
        return {"role": "x-item", "item": item}
    kind = item.get("type")
    if kind in (None, "message") and isinstance(item.get("role"), str):
        content = item.get("content")
        if isinstance(content, list):
            content = [_as_part(p) for p in content]
        return {"role": item["role"], "content": content}
    if kind in _CALLS:
        args = item.get("arguments") if kind == "function_call" else item.get("input")
        if kind == "local_shell_call":
            args = item.get("action")
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": str(item.get("call_id") or item.get("id") or ""), "type": "function",
            "function": {"name": str(item.get("name") or kind), "arguments": args}}]}
    if kind in _OUTPUTS:
        output = item.get("output")
        if isinstance(output, list):
            output = [_as_part(p) for p in output]
        elif isinstance(output, str) and (envelope := json_envelope(output)) is not None:
            # A JSON envelope around a command's text (Codex's ``{"output": .., "metadata": ..}``):
            # the text is the tool result the compressor sees, as if sent bare; the envelope rides
            # along whole in a part nothing reads as text, so the message's digest still tells two
            # outputs apart by their metadata, and the text is wrapped back in it (.tool_output).
            output = [{"type": "text", "text": envelope.text}, {"type": _ENVELOPE, "json": output}]
        return {"role": "tool", "tool_call_id": str(item.get("call_id") or ""), "content": output}
    return {"role": "x-item", "item": item}


def _as_part(part):
    if isinstance(part, dict) and part.get("type") in ("input_text", "output_text") and "text" in part:
        return {"type": "text", "text": part["text"]}
    return part


def apply_view(body: dict, view_messages: list) -> dict:
    """``body`` with the texts the compressor changed in ``view_messages`` put back in its input items."""
    items = body.get("input")
    was_string = isinstance(items, str)
    if was_string:
        items = [{"role": "user", "content": items}]
    out_items = list(items)
    for i, (item, msg) in enumerate(zip(items, view_messages)):
        if not isinstance(item, dict) or not isinstance(msg, dict):
            continue
        new = _put_back(item, msg)
        if new is not None:
            out_items[i] = new
    out = dict(body)
    if was_string and len(out_items) == 1 and isinstance(out_items[0].get("content"), str):
        out["input"] = out_items[0]["content"]
    else:
        out["input"] = out_items
    return out


def _put_back(item: dict, msg: dict) -> dict | None:
    kind = item.get("type")
    if kind in (None, "message"):
        content = msg.get("content")
        if isinstance(content, str) and content != item.get("content"):
            return {**item, "content": content}
        if isinstance(content, list) and isinstance(item.get("content"), list):
            return {**item, "content": _merge_parts(item["content"], content)}
        return None
    if kind in _OUTPUTS:
        output = msg.get("content")
        if _enveloped(output) and isinstance(item.get("output"), str):
            envelope = json_envelope(item["output"])
            text = output[0].get("text")
            if envelope is None or not isinstance(text, str) or text == envelope.text:
                return None
            return {**item, "output": envelope.wrap(text)}
        if isinstance(output, str) and output != item.get("output"):
            return {**item, "output": output}
        if isinstance(output, list) and isinstance(item.get("output"), list):
            return {**item, "output": _merge_parts(item["output"], output)}
    return None


def _enveloped(content) -> bool:
    return isinstance(content, list) and len(content) == 2 and isinstance(content[0], dict) \
        and isinstance(content[1], dict) and content[1].get("type") == _ENVELOPE


def _merge_parts(original: list, changed: list) -> list:
    out = []
    for orig, new in zip(original, changed):
        if isinstance(orig, dict) and isinstance(new, dict) and "text" in orig and new.get("text") != orig["text"]:
            out.append({**orig, "text": new["text"]})
        else:
            out.append(orig)
    return out
