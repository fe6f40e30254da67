"""A perfect model's answer to an MRCR sample, derived from its prompt alone (the generator's
and the CLI's tests check against it)."""

import re

from synth.mrcr.generate import ordinal

ORD = {ordinal(n): n for n in range(1, 20)}


def derive_answer(sample: dict) -> str:
    """Answer the final question from the prompt alone, as a perfect model would."""
    messages = sample["prompt"]
    q = messages[-1]["content"]
    rs = re.match(r"Prepend (\S+) to ", q).group(1)
    request = re.search(r'the request "(.*)"', q).group(1)
    replies = [
        messages[i + 1]["content"]
        for i, m in enumerate(messages[:-1])
        if m["role"] == "user" and m["content"] == request
    ]
    ks = [ORD[k] for k in re.findall(r"the (\d+(?:st|nd|rd|th))", q)]
    if "counting from the end" in q:
        picked = [replies[-ks[0]]]
    else:
        picked = [replies[k - 1] for k in ks]
    return rs + "\n\n".join(picked)
