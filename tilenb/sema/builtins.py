"""The built-in names of the tile language: what each call is, and how many arguments it takes.

Guarantees: the one list of built-ins; the checker types them, the backends implement them.
"""
UNARY_MATH = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "floor", "ceil", "round",
              "tanh", "sin", "cos", "erf")
BINARY_MATH = ("min", "max")
REDUCTIONS = {  # name -> (op, axis)
    "rowsum": ("sum", 1), "rowmax": ("max", 1), "rowmin": ("min", 1),
    "colsum": ("sum", 0), "colmax": ("max", 0), "colmin": ("min", 0),
}
ATOMICS = {"atomic_add": "add", "atomic_max": "max"}
# statements: combine a tile var across the CTAs of a thread block cluster (@cluster), in place
CLUSTER_REDUCTIONS = {"cluster_sum": "sum", "cluster_max": "max", "cluster_min": "min"}
CLUSTER_DTYPES = ("f32", "f64")
MAX_CLUSTER = 8          # CUDA's portable cluster size limit (CUDA C++ Programming Guide, clusters)
MAX_CLUSTER_TILE_BYTES = 16 * 1024   # a cluster reduction publishes its tile in static shared memory
OTHER = ("where", "dot", "dot_t", "transpose", "flat", "cdiv", "barrier")
CTX_FIELDS = ("block.x", "block.y", "block.z", "grid.x", "grid.y", "grid.z", "thread", "threads",
              "warp", "lane", "cluster.rank", "cluster.x")
ATTRIBUTES = ("launch", "autotune", "dynshared", "registers", "grid", "cluster")
CONSTANTS = {"true": True, "false": False}


_ALL_NAMES = None


def all_names() -> frozenset:
    """Every built-in function name (conversions included); built once: the checker asks for
    it on every declaration and call."""
    global _ALL_NAMES
    if _ALL_NAMES is None:
        from ..types import CONVERSIONS
        _ALL_NAMES = frozenset(set(UNARY_MATH) | set(BINARY_MATH) | set(REDUCTIONS) | set(ATOMICS) | set(CLUSTER_REDUCTIONS)
                           | set(OTHER)
                               | set(CONVERSIONS))
    return _ALL_NAMES
