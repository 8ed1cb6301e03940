"""A bounded load: 8 concurrent clients, 3 requests each, every response whole."""
from __future__ import annotations

import asyncio

import httpx
import numpy as np

TEXTS = ["Good morning. The weather is fine today.",
         "A short one.",
         "This sentence is somewhat longer than the others, so it is spoken in more pieces. Then another."]


def test_eight_clients_at_once_each_get_every_response_complete(served):
    async def client(k: int, c: httpx.AsyncClient) -> list[int]:
        sizes = []
        for i in range(3):
            text = TEXTS[(k + i) % len(TEXTS)]
            r = await c.post("/v1/audio/speech", json={"model": "myxtts", "input": text, "voice": "neutral",
                                                        "response_format": "pcm"})
            assert r.status_code == 200, r.text
            sizes.append(len(r.content))
            wav = np.frombuffer(r.content, dtype="<i2")
            assert wav.size > 2400 and np.abs(wav).max() > 30
        return sizes

    async def go():
        async with httpx.AsyncClient(base_url=served.url, headers=served.headers(), timeout=120) as c:
            return await asyncio.gather(*(client(k, c) for k in range(8)))

    sizes = asyncio.run(go())
    # the same text gives the same audio whoever it is batched with
    by_text = {}
    for k, per_client in enumerate(sizes):
        for i, n in enumerate(per_client):
            by_text.setdefault((k + i) % len(TEXTS), set()).add(n)
    assert all(len(v) == 1 for v in by_text.values()), by_text
    assert served.proc.poll() is None and served.health()["in_flight"] == 0
