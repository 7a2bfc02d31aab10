"""Agent sessions as other harnesses write them, in the shapes their documentation gives: the Hub's Session
Trace Simple Format (its own example), Pi's session file (a tree with a branch; its documented message types),
Claude Code's session log (one line per content block, side chains) and Codex's rollout (session_meta,
response_item, event_msg)."""

from __future__ import annotations

import json
from pathlib import Path

PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def _write(path: Path, lines: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def sts(path: Path) -> Path:
    """The Hub documentation's example session, with a second call whose result is an error."""
    return _write(path, [
        {"type": "session", "harness": "my-agent", "id": "abc123", "name": "what time is it"},
        {"type": "message", "message": {"role": "system", "content": "You tell the time."}},
        {"type": "message", "message": {"role": "user", "content": "what time is it?"}},
        {"type": "message", "message": {"role": "assistant", "content": "", "model": "my-model-1",
                                        "reasoningContent": "Use the clock.",
                                        "toolCalls": [{"id": "t1", "function": {"name": "get_time",
                                                                                "arguments": "{}"}}]}},
        {"type": "message", "message": {"role": "tool", "toolCallId": "t1",
                                        "content": "2026-07-01T15:00:00Z"}},
        {"type": "message", "message": {"role": "assistant", "content": "it is 15:00 UTC",
                                        "model": "my-model-1", "timestamp": 1782918000000}},
    ])  # fmt: skip


def pi(path: Path) -> Path:
    """Pi: a header without `harness`, entries linked by parentId; the user branched back after the first
    answer, so the first branch's answer is not on the path to the last entry."""
    usage = {
        "input": 100,
        "output": 20,
        "cacheRead": 50,
        "cacheWrite": 0,
        "totalTokens": 170,
        "cost": {"input": 0.001, "output": 0.002, "cacheRead": 0, "cacheWrite": 0, "total": 0.003},
    }
    return _write(path, [
        {"type": "session", "version": 3, "id": "pi-1", "timestamp": "2026-02-20T20:17:15.095Z", "cwd": "/w"},
        {"type": "message", "id": "a1", "parentId": None, "timestamp": "2026-02-20T20:17:16.000Z",
         "message": {"role": "user", "content": [{"type": "text", "text": "List the files."},
                                                 {"type": "image", "data": PNG_B64, "mimeType": "image/png"}],
                     "timestamp": 1}},
        {"type": "message", "id": "b1", "parentId": "a1", "timestamp": "2026-02-20T20:17:17.000Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "Abandoned branch."}],
                     "api": "anthropic-messages", "provider": "anthropic", "model": "claude-x",
                     "usage": usage, "stopReason": "stop", "timestamp": 2}},
        {"type": "model_change", "id": "m1", "parentId": "a1", "timestamp": "2026-02-20T20:17:18.000Z",
         "provider": "anthropic", "modelId": "claude-x"},
        {"type": "message", "id": "c1", "parentId": "m1", "timestamp": "2026-02-20T20:17:19.000Z",
         "message": {"role": "assistant", "content": [
             {"type": "thinking", "thinking": "ls it."},
             {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {"command": "ls"}}],
             "api": "anthropic-messages", "provider": "anthropic", "model": "claude-x", "usage": usage,
             "stopReason": "toolUse", "timestamp": 3}},
        {"type": "message", "id": "d1", "parentId": "c1", "timestamp": "2026-02-20T20:17:20.000Z",
         "message": {"role": "toolResult", "toolCallId": "call_1", "toolName": "bash",
                     "content": [{"type": "text", "text": "ls: permission denied"}], "isError": True,
                     "timestamp": 4}},
        {"type": "message", "id": "e1", "parentId": "d1", "timestamp": "2026-02-20T20:17:21.000Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "I cannot list them."}],
                     "api": "anthropic-messages", "provider": "anthropic", "model": "claude-x",
                     "usage": usage, "stopReason": "stop", "timestamp": 5}},
    ])  # fmt: skip


def claude_code(path: Path) -> Path:
    """Claude Code: bookkeeping lines, one assistant line per content block of one message id, tool results in
    user lines, a side chain (a subagent) left out."""
    base = {"sessionId": "cc-42", "cwd": "/w", "version": "2.1.0", "isSidechain": False}
    day = "2026-04-01"
    u = {
        "input_tokens": 10,
        "output_tokens": 30,
        "cache_read_input_tokens": 500,
        "cache_creation_input_tokens": 40,
    }
    return _write(path, [
        {"type": "permission-mode", "permissionMode": "default", "sessionId": "cc-42"},
        {**base, "type": "user", "uuid": "u1", "parentUuid": None, "timestamp": "2026-04-01T10:00:00.000Z",
         "message": {"role": "user", "content": "Fix the test."}},
        {**base, "type": "assistant", "uuid": "a1", "parentUuid": "u1", "timestamp": f"{day}T10:00:01.000Z",
         "message": {"id": "msg_1", "role": "assistant", "model": "claude-opus-x", "usage": u,
                     "content": [{"type": "thinking", "thinking": "Run it first.", "signature": "s"}]}},
        {**base, "type": "assistant", "uuid": "a2", "parentUuid": "a1", "timestamp": f"{day}T10:00:02.000Z",
         "message": {"id": "msg_1", "role": "assistant", "model": "claude-opus-x", "usage": u,
                     "stop_reason": "tool_use",
                     "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                                  "input": {"command": "pytest -q"}}]}},
        {**base, "type": "user", "uuid": "u2", "parentUuid": "a2", "timestamp": "2026-04-01T10:00:03.000Z",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                  "content": "1 failed", "is_error": False}]}},
        {**base, "isSidechain": True, "type": "assistant", "uuid": "s1", "parentUuid": "u2",
         "message": {"id": "msg_side", "role": "assistant", "model": "claude-haiku-x",
                     "content": [{"type": "text", "text": "subagent work"}]}},
        {**base, "type": "assistant", "uuid": "a3", "parentUuid": "u2", "timestamp": f"{day}T10:00:04.000Z",
         "message": {"id": "msg_2", "role": "assistant", "model": "claude-opus-x", "usage": u,
                     "stop_reason": "end_turn", "content": [{"type": "text", "text": "Fixed."}]}},
    ])  # fmt: skip


def codex(path: Path) -> Path:
    """Codex's rollout: one turn is the reasoning, the call and its usage up to the call's output."""
    return _write(path, [
        {"timestamp": "2026-04-20T18:43:56.191Z", "type": "session_meta",
         "payload": {"id": "cx-7", "timestamp": "2026-04-20T18:43:56.191Z", "cwd": ".",
                     "originator": "codex_cli", "cli_version": "0.50.0", "instructions": "You are Codex."}},
        {"timestamp": "2026-04-20T18:43:57.000Z", "type": "turn_context",
         "payload": {"cwd": ".", "approval_policy": "never", "model": "gpt-5-codex", "effort": "medium"}},
        {"timestamp": "2026-04-20T18:43:57.100Z", "type": "response_item",
         "payload": {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": "Count lines."}]}},
        {"timestamp": "2026-04-20T18:43:58.000Z", "type": "response_item",
         "payload": {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Use wc."}],
                     "encrypted_content": "x"}},
        {"timestamp": "2026-04-20T18:43:58.100Z", "type": "response_item",
         "payload": {"type": "function_call", "name": "shell", "arguments": "{\"command\": [\"wc\", \"-l\"]}",
                     "call_id": "call_9"}},
        {"timestamp": "2026-04-20T18:43:58.200Z", "type": "event_msg",
         "payload": {"type": "token_count", "info": {"last_token_usage": {
             "input_tokens": 1200, "cached_input_tokens": 1000, "output_tokens": 40,
             "reasoning_output_tokens": 12, "total_tokens": 1240}}}},
        {"timestamp": "2026-04-20T18:43:59.000Z", "type": "response_item",
         "payload": {"type": "function_call_output", "call_id": "call_9", "output": "42 file.txt"}},
        {"timestamp": "2026-04-20T18:44:00.000Z", "type": "response_item",
         "payload": {"type": "message", "role": "assistant",
                     "content": [{"type": "output_text", "text": "42 lines."}]}},
    ])  # fmt: skip


def write_all(root: Path) -> Path:
    sts(root / "sts" / "abc123.jsonl")
    pi(root / "pi" / "2026-02-20T20-17-15-095Z_pi-1.jsonl")
    claude_code(root / "claude_code" / "cc-42.jsonl")
    codex(root / "codex" / "rollout-2026-04-20-cx-7.jsonl")
    return root
