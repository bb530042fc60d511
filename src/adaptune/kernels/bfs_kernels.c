/* Breadth-first search levels in the adaptune dialect: one launch a level, driven from the host.
 * level[v] = BFS depth from the source, UNVISITED (0xffffffff) where not reached.
 * counts[cur + 1] (zeroed once a search) collects how many vertices level cur discovered (queue variants:
 * the next queue's length), so the host reads one word a level and stops at zero.
 * Defines: BLOCK (threads a block, power of two), VEC (threads a vertex for the group variants, <= BLOCK).
 */
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 32
#endif
#define UNVISITED 0xffffffffu

/* Adds a block's discoveries to counts[slot] with one atomic. Every thread of the block must call it. */
DEVICE void add_block_count(LOCAL u32 *scratch, const u32 mine, GLOBAL u32 *counts, const u32 slot) {
    scratch[LID()] = mine;
    BARRIER();
    for (u32 offset = BLOCK / 2; offset > 0; offset >>= 1) {
        if (LID() < offset) scratch[LID()] += scratch[LID() + offset];
        BARRIER();
    }
    if (LID() == 0 && scratch[0]) ATOMIC_ADD_U32(&counts[slot], scratch[0]);
}

KERNEL bfs_init(GLOBAL u32 *RESTRICT level, GLOBAL u32 *RESTRICT visited, const u32 n, const u32 n_bit_words,
                const u32 source, GLOBAL u32 *RESTRICT queue) {
    const u32 stride = NUM_GROUPS() * GROUP_SIZE();
    for (u32 v = GROUP_ID() * GROUP_SIZE() + LID(); v < n; v += stride) level[v] = v == source ? 0u : UNVISITED;
    for (u32 w = GROUP_ID() * GROUP_SIZE() + LID(); w < n_bit_words; w += stride)
        visited[w] = w == source / 32u ? 1u << (source % 32u) : 0u;
    if (GROUP_ID() == 0 && LID() == 0) queue[0] = source;
}

/* Top-down, VEC threads a vertex (coalesced neighbour reads for high degrees; VEC = 1: a thread a vertex,
 * every vertex checked each level, no queue). */
KERNEL bfs_topdown_group(const GLOBAL i32 *RESTRICT indptr, const GLOBAL i32 *RESTRICT indices,
                         GLOBAL u32 *RESTRICT level, const u32 n, const u32 cur, GLOBAL u32 *RESTRICT counts) {
    SHARED u32 scratch[BLOCK];
    u32 found = 0;
    const u32 lane = LID() % VEC;
    const u32 per_block = BLOCK / VEC;
    const u32 stride = NUM_GROUPS() * per_block;
    const u32 rounds = (n + stride - 1u) / stride;
    for (u32 r = 0; r < rounds; ++r) {
        const u32 v = r * stride + GROUP_ID() * per_block + LID() / VEC;
        if (v < n && level[v] == cur) {
            const i32 end = indptr[v + 1];
            for (i32 k = indptr[v] + (i32)lane; k < end; k += VEC) {
                const u32 w = (u32)indices[k];
                if (level[w] == UNVISITED) { level[w] = cur + 1u; ++found; }
            }
        }
    }
    add_block_count(scratch, found, counts, cur + 1u);
}

/* Edge-parallel: a thread an edge (src[k], indices[k]); work is even whatever the degrees. */
KERNEL bfs_edge(const GLOBAL i32 *RESTRICT src, const GLOBAL i32 *RESTRICT indices, GLOBAL u32 *RESTRICT level,
                const u32 m, const u32 cur, GLOBAL u32 *RESTRICT counts) {
    SHARED u32 scratch[BLOCK];
    u32 found = 0;
    const u32 stride = NUM_GROUPS() * BLOCK;
    const u32 rounds = (m + stride - 1u) / stride;
    for (u32 r = 0; r < rounds; ++r) {
        const u32 k = r * stride + GROUP_ID() * BLOCK + LID();
        if (k < m && level[(u32)src[k]] == cur) {
            const u32 w = (u32)indices[k];
            if (level[w] == UNVISITED) { level[w] = cur + 1u; ++found; }
        }
    }
    add_block_count(scratch, found, counts, cur + 1u);
}

/* Bottom-up: a thread an unvisited vertex looks for a parent on the current level and stops at the first
 * (cheap when the frontier is large; the graph must be symmetric). */
KERNEL bfs_bottomup(const GLOBAL i32 *RESTRICT indptr, const GLOBAL i32 *RESTRICT indices,
                    GLOBAL u32 *RESTRICT level, const u32 n, const u32 cur, GLOBAL u32 *RESTRICT counts) {
    SHARED u32 scratch[BLOCK];
    u32 found = 0;
    const u32 stride = NUM_GROUPS() * BLOCK;
    const u32 rounds = (n + stride - 1u) / stride;
    for (u32 r = 0; r < rounds; ++r) {
        const u32 v = r * stride + GROUP_ID() * BLOCK + LID();
        if (v < n && level[v] == UNVISITED) {
            const i32 end = indptr[v + 1];
            for (i32 k = indptr[v]; k < end; ++k) {
                if (level[(u32)indices[k]] == cur) { level[v] = cur + 1u; ++found; break; }
            }
        }
    }
    add_block_count(scratch, found, counts, cur + 1u);
}

/* Queue top-down, VEC threads a frontier vertex (VEC = 1: a thread a vertex). A neighbour is claimed once
 * through an atomic OR on the visited bitmap, then appended to the next queue. */
KERNEL bfs_queue(const GLOBAL i32 *RESTRICT indptr, const GLOBAL i32 *RESTRICT indices,
                 GLOBAL u32 *RESTRICT level, GLOBAL u32 *RESTRICT visited, const GLOBAL u32 *RESTRICT in_queue,
                 const u32 in_size, GLOBAL u32 *RESTRICT out_queue, const u32 cur, GLOBAL u32 *RESTRICT counts) {
    const u32 lane = LID() % VEC;
    const u32 per_block = BLOCK / VEC;
    const u32 stride = NUM_GROUPS() * per_block;
    for (u32 i = GROUP_ID() * per_block + LID() / VEC; i < in_size; i += stride) {
        const u32 v = in_queue[i];
        const i32 end = indptr[v + 1];
        for (i32 k = indptr[v] + (i32)lane; k < end; k += VEC) {
            const u32 w = (u32)indices[k];
            if (level[w] != UNVISITED) continue;
            const u32 bit = 1u << (w % 32u);
            if (ATOMIC_OR_U32(&visited[w / 32u], bit) & bit) continue;
            level[w] = cur + 1u;
            out_queue[ATOMIC_ADD_U32(&counts[cur + 1u], 1u)] = w;
        }
    }
}

/* Vertices on level `cur` into a queue (after bottom-up levels, before a top-down one), and their
 * visited bits (bottom-up levels set levels only). */
KERNEL bfs_collect(const GLOBAL u32 *RESTRICT level, GLOBAL u32 *RESTRICT visited, const u32 n, const u32 cur,
                   GLOBAL u32 *RESTRICT queue, GLOBAL u32 *RESTRICT size) {
    const u32 stride = NUM_GROUPS() * GROUP_SIZE();
    for (u32 v = GROUP_ID() * GROUP_SIZE() + LID(); v < n; v += stride) {
        const u32 l = level[v];
        if (l != UNVISITED) ATOMIC_OR_U32(&visited[v / 32u], 1u << (v % 32u));
        if (l == cur) queue[ATOMIC_ADD_U32(size, 1u)] = v;
    }
}

/* Structure probe (features, not a search): PROBE_STARTS blocks, each a bounded BFS from its own start vertex
 * (evenly spaced; the first vertex with an edge among the next PROBE_SKIP), expanding whole frontiers held in shared memory until PROBE_CAP vertices are reached, the
 * component is exhausted or PROBE_LEVELS levels are done; at most PROBE_EDGE_CAP neighbours a vertex are read.
 * out[block * PROBE_LEVELS + l] = vertices reached within l + 1 levels (the last value repeated after a stop).
 * How fast the reached set grows (levels to PROBE_CAP, growth dimension) tells meshes and roads (hundreds of
 * levels) from small-world graphs (a handful) whatever the vertex order. stamps: n words a block, holding
 * `gen` where visited by this call (no clearing between calls). */
#ifndef PROBE_CAP
#define PROBE_CAP 2048
#endif
#ifndef PROBE_LEVELS
#define PROBE_LEVELS 64
#endif
#ifndef PROBE_EDGE_CAP
#define PROBE_EDGE_CAP 256
#endif
#ifndef PROBE_SKIP
#define PROBE_SKIP 1024
#endif
KERNEL bfs_probe(const GLOBAL i32 *RESTRICT indptr, const GLOBAL i32 *RESTRICT indices, const u32 n,
                 GLOBAL u32 *RESTRICT stamps, const u32 gen, GLOBAL u32 *RESTRICT out) {
    SHARED u32 queue[2][PROBE_CAP];
    SHARED u32 sizes[2];
    SHARED u32 total;
    GLOBAL u32 *st = stamps + (u64)GROUP_ID() * n;
    GLOBAL u32 *rec = out + GROUP_ID() * PROBE_LEVELS;
    u32 start = (u32)(((u64)GROUP_ID() * 2u + 1u) * n / (2u * NUM_GROUPS()));
    for (u32 t = 0; t < PROBE_SKIP && indptr[start + 1] == indptr[start]; ++t) start = start + 1u < n ? start + 1u : 0u;
    if (LID() == 0) {
        queue[0][0] = start;
        sizes[0] = 1u;
        sizes[1] = 0u;
        total = 1u;
        st[start] = gen;
    }
    BARRIER();
    u32 cur = 0;
    for (u32 lev = 0; lev < PROBE_LEVELS; ++lev) {
        const u32 size = sizes[cur];
        const u32 tot = total;
        if (size == 0u || tot >= PROBE_CAP) {  /* uniform: shared values read after a barrier */
            for (u32 l = lev + LID(); l < PROBE_LEVELS; l += BLOCK) rec[l] = tot;
            break;
        }
        for (u32 i = LID(); i < size; i += BLOCK) {
            const u32 v = queue[cur][i];
            const i32 b = indptr[v];
            i32 e = indptr[v + 1];
            if (e - b > PROBE_EDGE_CAP) e = b + PROBE_EDGE_CAP;
            for (i32 k = b; k < e; ++k) {
                const u32 w = (u32)indices[k];
                if (st[w] != gen && ATOMIC_MAX_U32(&st[w], gen) != gen) {
                    const u32 slot = ATOMIC_ADD_U32(&sizes[1u - cur], 1u);
                    if (slot < PROBE_CAP) queue[1u - cur][slot] = w;
                }
            }
        }
        BARRIER();
        if (LID() == 0) {
            const u32 found = sizes[1u - cur];
            total = tot + found;
            sizes[1u - cur] = found < PROBE_CAP ? found : PROBE_CAP;
            sizes[cur] = 0u;
            rec[lev] = tot + found;
        }
        BARRIER();
        cur = 1u - cur;
    }
}
