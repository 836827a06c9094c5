# The program every system starts from (bench/peers); the loopback model
# answers every call with a full rewrite of it (tests/fake_llm/bench_server.py
# --program).
# EVOLVE-BLOCK-START
def solve(x):
    """candidate 0"""
    return x % 97
# EVOLVE-BLOCK-END
