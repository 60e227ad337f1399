"""One connection's phases (``metrics.server.front.connection.Wire``), without a server: a
connection that turned busy is never taken back, and its steps are told to a named logger."""

import logging
import socket

from panelist.metrics.server.front.connection import BODY, BUSY, HEAD, IDLE, Wire


def wire_pair():
    ours, theirs = socket.socketpair()
    return Wire(ours, 5.0, 5.0), ours, theirs


def test_a_busy_connection_is_never_taken_back():
    wire, ours, theirs = wire_pair()
    try:
        assert wire.phase == HEAD
        assert wire.turn(BUSY) is True
        assert wire.drop() is False, "a connection being answered is kept"
        assert wire.dropped is False and wire.phase == BUSY
        theirs.sendall(b"x")  # its read side is still open
        assert ours.recv(1) == b"x"
    finally:
        ours.close()
        theirs.close()


def test_a_taken_back_connection_does_not_turn_busy():
    wire, ours, theirs = wire_pair()
    try:
        wire.await_request()
        assert wire.phase == IDLE
        assert wire.drop() is True
        assert wire.turn(BUSY) is False and wire.turn(BODY) is False
        assert wire.phase == IDLE and wire.dropped is True
        assert ours.recv(1) == b"", "its read side was shut, which wakes its thread"
        assert wire.drop() is False, "taken back once"
    finally:
        ours.close()
        theirs.close()


def test_phase_changes_go_to_a_named_logger_at_debug_only(caplog):
    wire, ours, theirs = wire_pair()
    try:
        with caplog.at_level(logging.INFO, logger="panelist.server.connection"):
            wire.await_request()
        assert caplog.records == [], "silent unless DEBUG is turned on"
        with caplog.at_level(logging.DEBUG, logger="panelist.server.connection"):
            wire.drop()
        said = [r for r in caplog.records if r.name == "panelist.server.connection"]
        assert [r.levelno for r in said] == [logging.DEBUG]
        assert "taken back in phase IDLE" in said[0].getMessage()
    finally:
        ours.close()
        theirs.close()
