"""A server holding more than 1,024 descriptors (as one under a few thousand connections does)
still tells a caller that is waiting for its panel from one that left: ``select`` refuses a
descriptor past FD_SETSIZE, and a caller whose connection has one was taken for gone."""

import json
import os
import socket

from conftest import PATIENCE, Gateway
from panelist.gateway import make_gateway
from test_gateway_head import BODY
from test_slow_clients import one_reply

FD_SETSIZE = 1024


def test_a_caller_on_a_descriptor_past_1024_gets_its_panel(home, sim):
    for member in ("fast", "mid", "slow"):
        sim.script(member, latency=1.0)  # the server checks on its caller while seats work
    gw = Gateway(make_gateway(home, env={}))  # it raises the process's descriptor limit
    filler = []
    try:
        # every descriptor below FD_SETSIZE is taken: the connections opened next are past it
        while not filler or filler[-1] < FD_SETSIZE + 8:
            filler.append(os.open(os.devnull, os.O_RDONLY))
        with socket.create_connection(("127.0.0.1", gw.server.port), timeout=PATIENCE) as s:
            assert s.fileno() > FD_SETSIZE
            s.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: "
                b"application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (gw.server.port, len(BODY), BODY)
            )
            [(status, _, body)] = one_reply(s)
        assert status == 200 and json.loads(body)["bench"]["panel"]
    finally:
        for fd in filler:
            os.close(fd)
        gw.close()
