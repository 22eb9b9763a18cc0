#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""An asyncio inference server, simulated, instrumented with ringprof's Python API.

Clients arrive at --rate requests/s. Each request (ringprof.request) tokenizes its
prompt, waits in the queue, is prefilled and decoded by a batching scheduler
(continuous batching: up to --max-batch sequences per decode step), then runs
its tool calls concurrently with asyncio.gather and has a short second decode.
The scheduler's own steps (schedule, prefill, decode_step) are spans on the
event-loop thread (outside any request, each on a track of its own); the queue
length and the batch size are counters, the tokens made a rate (tokens/s). Requests
carry their model and endpoint as attributes (their own rows in top and the slowest
list), and mark two milestones (req.mark): "scheduled" (its first sequence entered a
batch: tokenize and queue wait) and "first_token" (TTFT). Each prefill and decode step
is charged to the requests in its batch (span.charge: its time split between them, in
each request's charged_ns). At the end the server prints its own TTFT percentiles and
the mean time charged per request, from its own clock stamps, to compare with ringprof's. With --torch (Debian's python3-torch), prefill and decode run a small
transformer layer with random weights (no download) on the CPU; otherwise the
"device" time is a sleep.

    ringprof run --session demo &
    RINGPROF_SESSION=demo PYTHONPATH=build/producers/python \\
        /usr/bin/python3 tools/demo/demo_server.py --duration 20
    ringprof top --session demo

or, with every Python call recorded too: python -m ringprof tools/demo/demo_server.py
"""
import argparse
import asyncio
import random
import time

import ringprof

tokenize = ringprof.span("tokenize", "FUNCTION")
queue_wait = ringprof.span("queue_wait", "QUEUE")
generate = ringprof.span("generate", "LLM")
schedule = ringprof.span("schedule", "SCHED")
prefill = ringprof.span("prefill", "step")
decode_step = ringprof.span("decode_step", "step")
detokenize = ringprof.span("detokenize", "FUNCTION")
tools_span = ringprof.span("tools", "FUNCTION")


class Model:
    """The compute of one step: a transformer layer (torch) or a sleep."""

    def __init__(self, use_torch, d_model=128):
        self.torch = None
        self.name = "tiny-%d" % d_model if use_torch else "sleep"
        if use_torch:
            import torch
            torch.manual_seed(0)
            torch.set_num_threads(1)
            self.torch = torch
            self.layer = torch.nn.TransformerEncoderLayer(d_model, nhead=4,
                                                          dim_feedforward=256,
                                                          batch_first=True).eval()
            self.d = d_model

    async def run(self, batch, tokens, base_s):
        if self.torch is None:
            await asyncio.sleep(base_s * (1 + 0.02 * batch * tokens ** 0.5))
            return
        with self.torch.no_grad():
            x = self.torch.randn(batch, tokens, self.d)
            self.layer(x)
        await asyncio.sleep(0)  # let the loop breathe between steps


class Seq:
    def __init__(self, prompt_tokens, max_new, req, marks=True):
        self.prompt = prompt_tokens
        self.left = max_new
        self.req = req  # the request it serves (charged its share of each step)
        self.marks = marks  # it marks its request's milestones (its first sequence)
        self.t0 = time.monotonic_ns()  # the server's own stamp of the request's start
        self.ttft_ns = None
        self.started = asyncio.Event()
        self.done = asyncio.get_running_loop().create_future()


class Scheduler:
    def __init__(self, model, max_batch):
        self.model, self.max_batch = model, max_batch
        self.queue = asyncio.Queue()
        self.running = []

    async def loop(self):
        while True:
            with schedule:
                new = []
                while not self.queue.empty() and len(self.running) + len(new) < self.max_batch:
                    new.append(self.queue.get_nowait())
            ringprof.counter("queue_len", self.queue.qsize())
            if new:
                for s in new:
                    s.started.set()
                    if s.marks:
                        s.req.mark("scheduled")
                t0 = time.monotonic_ns()
                with prefill:
                    for s in new:  # the batch's requests share its time
                        prefill.charge(s.req)
                    await self.model.run(len(new), max(s.prompt for s in new), 0.004)
                own_charge(new, time.monotonic_ns() - t0)
                self.running += new
            if not self.running:
                s = await self.queue.get()
                await self.queue.put(s)
                continue
            ringprof.counter("batch_size", len(self.running))
            t0 = time.monotonic_ns()
            with decode_step:
                for s in self.running:
                    decode_step.charge(s.req)
                await self.model.run(len(self.running), 1, 0.002)
            own_charge(self.running, time.monotonic_ns() - t0)
            ringprof.counter("tokens", len(self.running), rate=True)  # tokens, tokens/s
            for s in self.running:
                if s.marks and s.ttft_ns is None:  # its first token
                    s.ttft_ns = time.monotonic_ns() - s.t0
                    s.req.mark("first_token")
                s.left -= 1
                if s.left == 0:
                    s.done.set_result(None)
            self.running = [s for s in self.running if s.left > 0]


@ringprof.span("tool_call", "TOOL")
async def tool_call(kind):
    await asyncio.sleep(random.uniform(0.005, 0.03) * (2 if kind == "search" else 1))
    return kind


ENDPOINTS = ("/v1/chat", "/v1/completions")


TTFT_NS = []  # the server's own TTFT of each request, from time.monotonic_ns
CHARGED_NS = {}  # the server's own: request -> sum of step time / batch size


def own_charge(batch, dur_ns):
    for s in batch:
        CHARGED_NS[s.req] = CHARGED_NS.get(s.req, 0) + dur_ns // len(batch)


async def handle(sched, rid, rng):
    endpoint = ENDPOINTS[rng.random() < 0.3]
    async with ringprof.request("request", model=sched.model.name, endpoint=endpoint) as req:
        t0 = time.monotonic_ns()
        with tokenize:
            prompt = sum(len(w) for w in ("tok%d" % i for i in range(rng.randint(50, 400))))
            prompt = 16 + prompt % 240
        seq = Seq(prompt, rng.randint(8, 48), req)
        seq.t0 = t0
        async with queue_wait:
            await sched.queue.put(seq)
            await seq.started.wait()
        async with generate:
            await seq.done
        TTFT_NS.append(seq.ttft_ns)
        tools = rng.sample(["search", "calc", "retrieve", "code"], rng.randint(1, 3))
        async with tools_span:  # the tool calls: siblings under it, at once
            await asyncio.gather(*(tool_call(t) for t in tools))
        seq2 = Seq(32, rng.randint(4, 12), req, marks=False)
        async with queue_wait:
            await sched.queue.put(seq2)
            await seq2.started.wait()
        async with generate:
            await seq2.done
        with detokenize:
            "".join(chr(97 + i % 26) for i in range(500))


async def main(a):
    rng = random.Random(a.seed)
    sched = Scheduler(Model(a.torch), a.max_batch)
    loop_task = asyncio.create_task(sched.loop())
    tasks, end = set(), time.monotonic() + a.duration
    rid = 0
    while time.monotonic() < end and (a.requests == 0 or rid < a.requests):
        t = asyncio.create_task(handle(sched, rid, rng))
        tasks.add(t)
        t.add_done_callback(tasks.discard)
        rid += 1
        await asyncio.sleep(rng.expovariate(a.rate))
    await asyncio.gather(*tasks)
    loop_task.cancel()
    print("demo_server: %d requests, ringprof %s, dropped %d" %
          (rid, "on" if ringprof.enabled() else "off", ringprof.dropped()))
    v = sorted(TTFT_NS)
    if v:  # lower-rank quantiles, as ringprof's sketch defines them
        print("demo_server: TTFT (server's own stamps) p50 %.3f ms p90 %.3f ms p99 %.3f ms" %
              tuple(v[int(q * (len(v) - 1))] / 1e6 for q in (0.5, 0.9, 0.99)))
    if CHARGED_NS:
        print("demo_server: charged (server's own stamps) %.3f ms per request, %d requests" %
              (sum(CHARGED_NS.values()) / len(CHARGED_NS) / 1e6, len(CHARGED_NS)))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of arrivals")
    ap.add_argument("--requests", type=int, default=0, help="stop after N (0: no limit)")
    ap.add_argument("--rate", type=float, default=40.0, help="arrivals per second")
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--torch", action="store_true", help="a real layer (python3-torch)")
    ap.add_argument("--trace-calls", action="store_true",
                    help="also record every Python call (ringprof.profile)")
    args = ap.parse_args()
    if args.trace_calls:
        with ringprof.profile():
            asyncio.run(main(args))
    else:
        asyncio.run(main(args))
