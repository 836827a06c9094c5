#!/usr/bin/env python3
"""Test double (labelled): a model for the `exec` provider that answers the
sub-agents of a C rmsnorm task the way a chat model does: prose around the
code, a usage example after the kernel, a first kernel that does not
compile, a reply cut by the token limit (finish_reason "length") unless it
is given more room. It also checks what each prompt holds: a fix prompt
without the plan, the reference, the benchmark sizes or the earlier error
gets a reply with no code, so the run only succeeds when the prompts carry
what the agents promise.

Reads the exec provider's JSON request on stdin; writes a JSON reply."""
import json
import re
import sys

GOOD = r"""#include <math.h>

void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    float acc = 0.0f;
    #pragma omp simd reduction(+:acc)
    for (int c = 0; c < cols; c++) acc += xr[c] * xr[c];
    const float inv = 1.0f / sqrtf(acc / (float)cols + 1e-5f);
    float *o = out + (long)r * cols;
    #pragma omp simd
    for (int c = 0; c < cols; c++) o[c] = xr[c] * inv * scale[c];
  }
}
"""

# the first version forgets to declare `inv`: a compile error for fix
BROKEN = GOOD.replace("const float inv = ", "inv = ")

USAGE = """```c
float x[8] = {0}, s[4] = {1, 1, 1, 1}, o[8];
kernel(x, s, o, 2, 4);
```"""


def reply(req):
    system = req.get("system") or ""
    prompt = req["messages"][-1]["content"]
    agent = re.search(r"sub-agent \((\w+)\)", system).group(1)
    # every prompt carries the hardware and size facts
    if "benchmark size (timed): {cols=" not in system:
        return {"text": "I cannot see the sizes."}
    if agent == "tests":
        return {"text": 'Two shapes that hit remainders:\n\n```json\n[{"rows": 3, "cols": 17}]\n```\n'}
    if agent == "plan":
        return {"text": "Single pass per row with SIMD reductions\n\nCompute the sum of squares of each row with an "
                        "OpenMP SIMD reduction, then scale in a second vectorised loop; parallelise over rows only "
                        "when there are enough of them. Correctness risk: the remainder of each row."}
    if agent == "implement":
        body = ("Here is the kernel following the plan. Each row is reduced once and then scaled.\n\n```c\n"
                + BROKEN + "```\n\nYou can call it like this:\n\n" + USAGE + "\n")
        if (req.get("max_tokens") or 0) <= 8192:
            # cut by the token limit: the agent must ask again with more room
            return {"text": body[: len(body) // 2], "finish_reason": "length"}
        return {"text": body, "finish_reason": "stop"}
    if agent == "fix":
        needed = ["## Plan the kernel implements", "Single pass per row", "## Reference implementation",
                  "undeclared", "Changed:"]
        missing = [n for n in needed if n not in prompt]
        if missing:
            return {"text": "The prompt lacks " + ", ".join(missing) + "; I cannot repair it."}
        return {"text": "Changed: declared `inv` as a const float.\n\n```c\n" + GOOD + "```\n\nUsage:\n\n"
                        + USAGE + "\n"}
    if agent == "tune":
        code = re.search(r"```c\n(.*?)```", prompt, re.S).group(1)
        return {"text": "The kernel has no block size worth tuning; here it is unchanged.\n\n```c\n" + code
                        + "```\n"}
    if agent == "profile":
        return {"text": "The kernel is memory-bound: it reads each row twice. Fuse the two passes over a row "
                        "held in L1 when cols is small."}
    return {"text": "unknown agent " + agent}


def main():
    req = json.load(sys.stdin)
    out = reply(req)
    out.setdefault("finish_reason", "stop")
    sys.stdout.write(json.dumps(out))


if __name__ == "__main__":
    main()
