"""CPU check of tail_item's sequence (a port of the closed form): a permutation of all items, and each W(s) after every row of strip s."""
import itertools
def item(i, N, S, chunks, R):
    rows0 = min(N, 2 * R)
    if i < rows0: return (True, i, 0)
    i -= rows0
    periods = max(S - 2, 0)
    middle = periods * chunks + (N - 2 * R) if periods > 0 else 0
    if i < middle:
        p, r = divmod(i, chunks + R)
        return (False, p, r) if r < chunks else (True, (p + 2) * R + r - chunks, 0)
    i -= middle
    first = S - 2 if S >= 2 else 0
    return (False, first + i // chunks, i % chunks)
n = 0
for R, K in [(128, 64), (64, 32), (256, 128), (4, 2)]:
    for N, C in itertools.product([1, 3, R - 1, R, R + 1, 2 * R, 2 * R + 5, 3 * R, 5 * R + 7, 1024], [1, K - 1, K, 3 * K + 1, 8192 if R > 8 else 40]):
        S = (N + R - 1) // R; chunks = (C + K - 1) // K; total = N + S * chunks
        seq = [item(i, N, S, chunks, R) for i in range(total)]
        assert len(set(seq)) == total, (N, C)
        assert {x[1] for x in seq if x[0]} == set(range(N))
        assert {(x[1], x[2]) for x in seq if not x[0]} == {(s, k) for s in range(S) for k in range(chunks)}
        pos = {x: j for j, x in enumerate(seq)}
        for (isrow, a, b), j in pos.items():
            if not isrow:
                assert all(pos[(True, r, 0)] < j for r in range(a * R, min(N, (a + 1) * R))), (N, C, a)
        n += 1
print(n, "shapes ok")
