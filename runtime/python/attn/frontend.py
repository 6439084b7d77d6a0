"""Write attention scores, masks and normalizers as Python functions; get attn IR.

    from attn import exp, sigmoid
    tanhmax = attn.normalizer(numerator=lambda s: exp(s) - exp(-s),
                              denominator=lambda s: exp(s) + exp(-s), name="tanhmax")
    alibi = attn.score(mod=lambda s, i, j, slope: s - slope * abs(i - j),
                       params=dict(slope=0.25), name="alibi")
    ir = attn.kernel(tanhmax, score=alibi, mask=lambda i, j: j <= i)
    print(ir)                       # attn IR text; ir.save("k.mlir") for attn-opt / attn-compile
    kernel = attn.compile(ir)       # or ir.compile(), attn.MultiheadAttention(..., normalizer=ir)

Each function is called once, with symbolic values (tracing): `s` (the score), `b`, `h`
(batch and head index), `i`, `j` (query and key positions) and the declared params, all
passed by name (a function takes any subset). Tensor inputs (attn.tensor_input) are read
by indexing them with positions: `slopes[h]`, `doc[b, i]`. The
operators and functions applied to them record arith/math ops of one region; the result
is the region's yield. Shared subexpressions are recorded once (structural hashing), values
are named after the Python variables that hold them (else after their op and operands),
each region carries its Python source as a comment and every op a `loc("file.py":line:col)`
of the Python code that made it, so the compiler's diagnostics name the Python line.

A construct that cannot be traced (Python `if` on a symbolic value, math.exp, an
unsupported torch or numpy function, ...) raises TraceError naming it and its file:line.
"""

import ast
import functools
import inspect
import linecache
import math
import numbers
import operator
import os
import re
import sys
import textwrap
import threading

import torch

from .tables import CALL_DIMS

# Value types: the region's float type, index (positions), i1 (comparisons), and i64 (only
# between index and float).
FLOAT, INDEX, BOOL, I64 = "float", "index", "i1", "i64"
_FLOAT_TYPE = "f32"   # the float type of every traced region
_MLIR_TYPE = {FLOAT: _FLOAT_TYPE, INDEX: INDEX, BOOL: BOOL, I64: I64, "i32": "i32", "i8": "i8"}
_F32_MAX = 3.4028234663852886e38

# The arguments of each region kind, by name and in IR order (then params). Functions take
# them by name.
_INDICES = (("b", INDEX), ("h", INDEX), ("i", INDEX), ("j", INDEX))
_ROLE_ARGS = {
    "numerator": (("s", FLOAT), *_INDICES),
    "denominator": (("s", FLOAT), *_INDICES),
    "log_survival": (("s", FLOAT), *_INDICES),
    "mod": (("s", FLOAT), *_INDICES),
    "feature": (("x", FLOAT),),
    "mask": _INDICES,
    "offset": _INDICES[:3],
}
_ARGUMENT_NAMES = ("s", "b", "h", "i", "j", "x")
# The name of a region's result when no Python variable holds it.
_RESULT_NAME = {"numerator": "g", "denominator": "den", "log_survival": "d", "mod": "score", "feature": "phi",
                "mask": "keep", "offset": "beta"}
_CONTRACTS = ("dot", "scaled_dot", "bilinear", "additive", "cosine")


class TraceError(TypeError):
    """A Python construct that cannot become attn IR; the message starts with file:line."""


# ----------------------------------------------------------------------- source positions

@functools.lru_cache(maxsize=1024)
def _internal(filename):
    """Frames of the attn package and of torch/numpy (their dispatch to our overrides):
    the user's code is the first frame outside them."""
    dirs = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(torch.__file__)]
    if "numpy" in sys.modules:
        dirs.append(os.path.dirname(sys.modules["numpy"].__file__))
    return os.path.abspath(filename).startswith(tuple(d + os.sep for d in dirs))


def _user_frame():
    frame = sys._getframe(1)
    while frame is not None and _internal(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


@functools.lru_cache(maxsize=256)
def _positions(code):
    return list(code.co_positions()) if hasattr(code, "co_positions") else None


def _span(frame):
    """(file, line, col, end_line, end_col) of the instruction `frame` executes (col 0-based;
    col None where Python keeps no columns)."""
    positions = _positions(frame.f_code)
    if positions and frame.f_lasti // 2 < len(positions):
        line, end_line, col, end_col = positions[frame.f_lasti // 2]
        if line is not None and col is not None:
            return frame.f_code.co_filename, line, col, end_line, end_col
    return frame.f_code.co_filename, frame.f_lineno, None, None, None


def _here():
    """(file, line, col) of the user's code running now (col 1-based, as MLIR's)."""
    frame = _user_frame()
    if frame is None:
        return ("<unknown>", 0, 0)
    filename, line, col, _, _ = _span(frame)
    return (filename, line, (col or 0) + 1)


def _source_line(filename, line):
    return linecache.getline(filename, line).strip()


def _error(message, where=None):
    """A TraceError whose message starts with file:line (of the user's code running now, or
    `where` = (file, line, ...)) and ends with that source line."""
    filename, line = (where or _here())[:2]
    text = _source_line(filename, line)
    return TraceError(f"{filename}:{line}: {message}" + (f"\n    {text}" if text else ""))


@functools.lru_cache(maxsize=64)
def _syntax(source):
    """A file's AST and its child -> parent map (None if it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    return tree, parents, source


def _syntax_of(filename):
    lines = linecache.getlines(filename)
    return _syntax("".join(lines)) if lines else None


def _node_span(node):
    return (getattr(node, "lineno", None), getattr(node, "col_offset", None),
            getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None))


def _node_at(filename, line, col, end_line, end_col):
    """The innermost AST node spanning exactly these positions, with its parent map and
    the file's source."""
    syntax = _syntax_of(filename)
    if syntax is None or col is None:
        return None, None, None
    tree, parents, source = syntax
    span = (line, col, end_line, end_col)
    found = [node for node in ast.walk(tree) if _node_span(node) == span]
    if not found:
        return None, None, None
    # The same span may hold nested nodes (e.g. Expr(Call)): the innermost one.
    return found[-1], parents, source


def _construct(frame):
    """Words naming the Python construct `frame` executes: "a Python `if`", "`math.exp(s)`"."""
    filename, line, col, end_line, end_col = _span(frame)
    node, parents, source = _node_at(filename, line, col, end_line, end_col)
    if node is None:
        text = _source_line(filename, line)
        return f"`{text}`" if text else "an expression"
    segment = lambda n: ast.get_source_segment(source, n)
    parent = parents.get(node)
    for statement, words in ((ast.If, "a Python `if`"), (ast.While, "a Python `while`")):
        if isinstance(parent, statement) and parent.test is node:
            return f"{words} on `{segment(node)}`"
    # Python evaluates the test of `a if c else b`, and the operands of and / or / not.
    if isinstance(parent, ast.IfExp) and parent.test is node or \
            isinstance(parent, ast.BoolOp | ast.UnaryOp):
        node = parent
    if isinstance(node, ast.IfExp):
        return f"a conditional expression `{segment(node)}`"
    if isinstance(node, ast.BoolOp):
        return f"Python `{'and' if isinstance(node.op, ast.And) else 'or'}` in `{segment(node)}`"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return f"Python `not` in `{segment(node)}`"
    if isinstance(node, ast.Assert):
        return f"`assert {segment(node.test)}`"
    if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        return f"the comprehension `{segment(node)}`"
    if isinstance(node, ast.For):
        return f"a `for` loop over `{segment(node.iter)}`"
    return f"`{segment(node)}`"


def _function_source(fn):
    """(file, line, source text or None) of a function or lambda: the lambda expression
    itself, not the whole line, where the file parses."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:   # a callable object, functools.partial, ...
        filename, line, _ = _here()
        return filename, line, None
    filename, line = code.co_filename, code.co_firstlineno
    syntax = _syntax_of(filename)
    if syntax is not None:
        tree, _, source = syntax
        body = [(ln, col) for ln, _, col, end in (_positions(code) or [])
                if ln is not None and col is not None and (col, end) != (0, 0)]  # not RESUME
        lambdas = [node for node in ast.walk(tree) if isinstance(node, ast.Lambda)
                   and node.lineno == line and body and all(
                       (node.lineno, node.col_offset) <= p <= (node.end_lineno, node.end_col_offset)
                       for p in body)]
        if lambdas:   # the innermost lambda holding the code (lambdas may nest on a line)
            return filename, line, ast.get_source_segment(source, lambdas[-1])
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and line == min(
                    [node.lineno] + [d.lineno for d in node.decorator_list]):
                text = ast.get_source_segment(source, node, padded=True)
                return filename, line, textwrap.dedent(text).strip()
    try:
        return filename, line, inspect.getsource(fn).strip()
    except (OSError, TypeError):
        return filename, line, None


def _describe(fn):
    """`lambda s: exp(s)` (file.py:3) for messages."""
    filename, line, text = _function_source(fn)
    short = text.splitlines()[0] if text else getattr(fn, "__name__", repr(fn))
    return f"`{short}` ({filename}:{line})"


# ------------------------------------------------------------------------------ values

_tracing = threading.local()   # .regions: the regions being traced, innermost last


def _float_literal(x, what="constant"):
    """A float as an MLIR literal that reads back to the same double (a `.` is required)."""
    x = float(x)
    if not math.isfinite(x):
        raise _error(f"{what} {x} is not finite")
    text = repr(x)
    mantissa, _, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + ("e" + exponent if exponent else "")


class _Region:
    """The values of one region being traced: block arguments, then ops in creation order,
    structurally hashed (one value per distinct op, operands and attribute)."""

    def __init__(self, kind, what):
        self.kind = kind          # "numerator", "mod", "mask", ...
        self.what = what          # "the numerator of attn.normalizer @tanhmax", for messages
        self.values = []
        self.by_key = {}
        self.arguments = []
        self.variable_names = {}  # id(value) -> Python variable name
        self.open = True
        self.result = None
        self.source = None        # (file, line, text) of the traced function
        self.reads = []           # the TensorInputs this region reads, first read first

    def argument(self, name, type):
        value = Value(self, "arg", (), name, type, None, None)
        self.arguments.append(value)
        return value

    def op(self, name, operands, type, attr=None, commutative=False, hint=None):
        """The value of op `name` (one per structure); `hint` = (pattern, operands, fallback)
        names it in the printed IR, e.g. ("sigmoid_{0}", (x,), "sigmoid")."""
        ids = tuple(id(x) for x in operands)
        key = (name, attr, type, tuple(sorted(ids)) if commutative else ids)
        found = self.by_key.get(key)
        if found is None:
            found = Value(self, name, tuple(operands), attr, type, _here(), hint)
            self.by_key[key] = found
            self.values.append(found)
        return found

    def constant(self, number, type):
        if type == FLOAT:
            try:
                magnitude = abs(float(number))
            except OverflowError:   # an int past any float
                magnitude = math.inf
            if math.isnan(magnitude):
                raise _error(f"constant {number} is not a number; expected a finite one")
            if magnitude > _F32_MAX:
                raise _error(f"constant {number} does not fit {_FLOAT_TYPE}")
            literal = _float_literal(number)
        elif type == INDEX:
            if not -2**63 <= int(number) < 2**63:
                raise _error(f"integer constant {number} does not fit index (a signed "
                             f"64-bit integer)")
            literal = str(int(number))
        else:
            literal = "true" if number else "false"
        return self.op("arith.constant", (), type, literal)


class Value:
    """A symbolic scalar of a traced region (the score, a position, a param, or an op's
    result). Python operators and the functions in attn.frontend.FUNCTIONS (also reachable as
    attn.exp, torch.exp, numpy.exp, ...) record ops; anything needing a concrete value
    (`if`, float(), math.exp, indexing) raises TraceError."""

    __slots__ = ("region", "op", "operands", "attr", "type", "loc", "hint")
    __hash__ = object.__hash__

    def __init__(self, region, op, operands, attr, type, loc, hint):
        self.region, self.op, self.operands, self.attr = region, op, operands, attr
        self.type, self.loc, self.hint = type, loc, hint

    def __repr__(self):
        what = self.attr if self.op in ("arg", "arith.constant") else f"{self.op}(...)"
        return f"<attn.Value {what}: {_MLIR_TYPE[self.type]}>"

    # arithmetic (reverse forms take a Python number or a Value on the left)
    __add__ = lambda a, b: _add(a, b)
    __radd__ = lambda a, b: _add(b, a)
    __sub__ = lambda a, b: _sub(a, b)
    __rsub__ = lambda a, b: _sub(b, a)
    __mul__ = lambda a, b: _mul(a, b)
    __rmul__ = lambda a, b: _mul(b, a)
    __truediv__ = lambda a, b: _truediv(a, b)
    __rtruediv__ = lambda a, b: _truediv(b, a)
    __floordiv__ = lambda a, b: _floordiv(a, b)
    __rfloordiv__ = lambda a, b: _floordiv(b, a)
    __mod__ = lambda a, b: _mod(a, b)
    __rmod__ = lambda a, b: _mod(b, a)
    __pow__ = lambda a, b: _pow(a, b)
    __rpow__ = lambda a, b: _pow(b, a)
    __neg__ = lambda a: _neg(a)
    __pos__ = lambda a: _arith_kind("unary `+`", a) and a
    __abs__ = lambda a: _abs(a)
    # comparisons give i1 values; & | ^ ~ combine them (and work bitwise on positions)
    __lt__ = lambda a, b: _compare("<", a, b)
    __le__ = lambda a, b: _compare("<=", a, b)
    __gt__ = lambda a, b: _compare(">", a, b)
    __ge__ = lambda a, b: _compare(">=", a, b)
    __eq__ = lambda a, b: _compare("==", a, b)
    __ne__ = lambda a, b: _compare("!=", a, b)
    __and__ = lambda a, b: _bitwise("&", a, b)
    __rand__ = lambda a, b: _bitwise("&", b, a)
    __or__ = lambda a, b: _bitwise("|", a, b)
    __ror__ = lambda a, b: _bitwise("|", b, a)
    __xor__ = lambda a, b: _bitwise("^", a, b)
    __rxor__ = lambda a, b: _bitwise("^", b, a)
    __invert__ = lambda a: _invert(a)
    # round(), math.floor, math.ceil, math.trunc
    __round__ = lambda a, ndigits=None: _rounding("round", a, ndigits)
    __floor__ = lambda a: _rounding("floor", a)
    __ceil__ = lambda a: _rounding("ceil", a)
    __trunc__ = lambda a: _rounding("trunc", a)

    # What needs a concrete value.
    def __bool__(self):
        raise _untraceable(
            "needs a concrete True/False, but the value is symbolic (the function is traced "
            "once for every score and position); choose with attn.where(cond, a, b), and "
            "combine conditions with & | ~ instead of and / or / not")

    def __float__(self):
        raise _untraceable("converts a symbolic value to a Python number", suggest=True)

    __int__ = __complex__ = __float__

    def __index__(self):
        raise _untraceable("needs a concrete integer (an index, a range, a size), but the "
                           "value is symbolic; reading tensors at symbolic positions is not "
                           "supported")

    def __iter__(self):
        raise _untraceable("iterates over a symbolic value, which is a scalar")

    def __len__(self):
        raise _untraceable("asks for the length of a symbolic value, which is a scalar")

    def __getitem__(self, key):
        raise _untraceable("indexes a symbolic value, which is a scalar")

    # torch.exp(s), torch.where(...), numpy.exp(s), ...
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        impl = _torch_functions().get(func)
        if impl is None:
            name = getattr(func, "__qualname__", getattr(func, "__name__", repr(func)))
            name = name.replace("_VariableFunctionsClass.", "").replace("TensorBase.", "Tensor.")
            module = getattr(func, "__module__", None) or "torch"
            raise _error(f"{module}.{name} is not supported on symbolic values; supported: "
                         + ", ".join(f"torch.{n}" for n in sorted(FUNCTIONS) if hasattr(torch, n))
                         + ", and Python operators")
        return impl(*args, **(kwargs or {}))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        impl = _NUMPY_UFUNCS.get(ufunc.__name__) or FUNCTIONS.get(ufunc.__name__)
        if impl is None or method != "__call__" or kwargs:
            raise _error(f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
                         + " is not supported on symbolic values; use Python operators or "
                         "the attn functions (" + ", ".join(f"attn.{n}" for n in _EXPORTED) + ")")
        return impl(*inputs)

    def __array_function__(self, func, types, args, kwargs):
        impl = FUNCTIONS.get(func.__name__) if func.__name__ in ("where", "clip") else None
        if impl is None:
            raise _error(f"numpy.{func.__name__} is not supported on symbolic values; use "
                         "Python operators or the attn functions ("
                         + ", ".join(f"attn.{n}" for n in _EXPORTED) + ")")
        return impl(*args, **kwargs)


def _untraceable(what, suggest=False):
    """TraceError for a construct that needs a concrete value, naming the construct."""
    frame = _user_frame()
    if frame is None:
        return TraceError(f"a construct {what}")
    construct = _construct(frame)
    hint = ""
    if suggest:
        called = re.search(r"(\w+)\s*\(", construct)
        name = called.group(1) if called else None
        hint = (f"; use attn.{name} (or torch.{name})" if name in FUNCTIONS else
                "; use the attn functions (attn.exp, attn.sqrt, ...) or torch's")
    return _error(f"{construct} {what}{hint}", _span(frame))


# ------------------------------------------------------------------------- op recording

def _kind(x):
    if isinstance(x, Value):
        return x.type
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, numbers.Integral):
        return "int"
    if isinstance(x, numbers.Real):
        return "real"
    what = (f"a tensor {tuple(x.shape)}" if isinstance(x, torch.Tensor)
            else f"a {type(x).__module__}.{type(x).__qualname__}")
    raise _error(f"{what} cannot be used in a traced region: only its arguments (score, "
                 "positions, params), reads of attn.tensor_input and Python numbers")


def _type_name(x):
    """Words for the type of x in messages."""
    return {FLOAT: "a float value", INDEX: "a position (index value)", BOOL: "a condition",
            "bool": f"the Python bool {x!r}", "int": f"the Python int {x!r}",
            "real": f"the Python float {x!r}"}[_kind(x)]


def _region_of(*xs):
    regions = {id(x.region): x.region for x in xs if isinstance(x, Value)}
    if not regions:
        stack = getattr(_tracing, "regions", None)
        if not stack:
            raise _error("attn functions build traced regions: call them inside a function "
                         "given to attn.normalizer, attn.score or attn.mask (use torch.* or "
                         "math.* on numbers)")
        return stack[-1]
    if len(regions) > 1:
        raise _error("values of different regions are combined: "
                     + " and ".join(r.what for r in regions.values())
                     + " (each function is traced on its own; compute the value in both)")
    (region,) = regions.values()
    if not region.open:
        raise _error(f"a value of {region.what} is used after that function returned "
                     "(values cannot be kept between traced functions)")
    return region


def _arith_kind(what, *xs):
    """FLOAT or INDEX: the type arithmetic on `xs` computes in (Python semantics: positions
    stay integers, anything with a float becomes a float)."""
    kinds = {_kind(x) for x in xs}
    if kinds & {BOOL, "bool"}:
        raise _error(f"{what} of a comparison result (bool); turn it into a number with "
                     "attn.where(cond, 1.0, 0.0)")
    return FLOAT if kinds & {FLOAT, "real"} else INDEX


def _lift(x, kind, region):
    """x as a Value of `kind`: positions become floats, Python numbers constants."""
    if isinstance(x, Value):
        if x.type == kind:
            return x
        wide = region.op("arith.index_cast", (x,), I64)
        return region.op("arith.sitofp", (wide,), FLOAT, hint=("{0}_f", (x,), "float"))
    return region.constant(x, kind)


def _binary(symbol, float_op, index_op, commutative=False, kind=None):
    """An op on two operands converted to their common type (or to `kind`)."""
    def apply(a, b):
        region = _region_of(a, b)
        common = _arith_kind(symbol, a, b)   # (refuses bools also where `kind` is fixed)
        k = kind or common
        op = float_op if k == FLOAT else index_op
        return region.op(op, (_lift(a, k, region), _lift(b, k, region)), k,
                         commutative=commutative)
    return apply


_add = _binary("`+`", "arith.addf", "arith.addi", commutative=True)
_sub = _binary("`-`", "arith.subf", "arith.subi")
_mul = _binary("`*`", "arith.mulf", "arith.muli", commutative=True)
_truediv = _binary("`/`", "arith.divf", None, kind=FLOAT)
maximum = _binary("maximum()", "arith.maximumf", "arith.maxsi", commutative=True)
minimum = _binary("minimum()", "arith.minimumf", "arith.minsi", commutative=True)
maximum.__name__, minimum.__name__ = "maximum", "minimum"
maximum.__doc__ = "The larger of a and b (NaN if either is NaN, as torch.maximum)."
minimum.__doc__ = "The smaller of a and b (NaN if either is NaN, as torch.minimum)."


def _floordiv(a, b):
    """Python's a // b: floor(a / b) for floats, floor division for positions."""
    if _arith_kind("`//`", a, b) == FLOAT:
        return floor(_truediv(a, b))
    region = _region_of(a, b)
    return region.op("arith.floordivsi", (_lift(a, INDEX, region), _lift(b, INDEX, region)),
                     INDEX)


def _mod(a, b):
    """Python's a % b = a - (a // b) * b (the sign of b)."""
    return _sub(a, _mul(_floordiv(a, b), b))


def _pow(a, b):
    """a ** b: repeated multiplication for a Python int exponent (positions stay integers),
    math.powf otherwise."""
    if isinstance(b, numbers.Integral) and not isinstance(b, bool):
        _arith_kind("`**`", a)
        result, base, n = None, a, abs(int(b))
        while n:
            if n & 1:
                result = base if result is None else _mul(result, base)
            n >>= 1
            if n:
                base = _mul(base, base)
        if result is None:
            region = _region_of(a)
            result = region.constant(1, _arith_kind("`**`", a))
        return _truediv(1.0, result) if b < 0 else result
    region = _region_of(a, b)
    _arith_kind("`**`", a, b)
    return region.op("math.powf", (_lift(a, FLOAT, region), _lift(b, FLOAT, region)), FLOAT)


def _neg(a):
    region = _region_of(a)
    if _arith_kind("negation", a) == FLOAT:
        return region.op("arith.negf", (_lift(a, FLOAT, region),), FLOAT)
    return _sub(0, a)


def _abs(a):
    region = _region_of(a)
    kind = _arith_kind("abs", a)
    return region.op("math.absf" if kind == FLOAT else "math.absi", (_lift(a, kind, region),),
                     kind)


_PREDICATES = {  # Python comparison -> (cmpf predicate, cmpi predicate)
    "<": ("olt", "slt"), "<=": ("ole", "sle"), ">": ("ogt", "sgt"), ">=": ("oge", "sge"),
    "==": ("oeq", "eq"), "!=": ("une", "ne"),
}


def _compare(symbol, a, b):
    region = _region_of(a, b)
    kinds = {_kind(a), _kind(b)}
    if kinds <= {BOOL, "bool"}:
        if symbol not in ("==", "!="):
            raise _error(f"`{symbol}` orders comparison results (bools); compare numbers instead")
        kind, predicate = BOOL, _PREDICATES[symbol][1]
    else:
        kind = _arith_kind(f"`{symbol}`", a, b)
        predicate = _PREDICATES[symbol][0 if kind == FLOAT else 1]
    op = "arith.cmpf" if kind == FLOAT else "arith.cmpi"
    return region.op(op, (_lift(a, kind, region), _lift(b, kind, region)), BOOL, attr=predicate,
                     commutative=symbol in ("==", "!="))


_BITWISE = {"&": "arith.andi", "|": "arith.ori", "^": "arith.xori"}


def _logic_kind(symbol, *xs):
    """BOOL for conditions, INDEX for positions; floats have no bits to combine."""
    kinds = {_kind(x) for x in xs}
    if kinds <= {BOOL, "bool"}:
        return BOOL
    if kinds <= {INDEX, "int"}:
        return INDEX
    raise _error(f"`{symbol}` combines conditions (comparison results) or positions, not "
                 "floats")


def _bitwise(symbol, a, b):
    region = _region_of(a, b)
    kind = _logic_kind(symbol, a, b)
    return region.op(_BITWISE[symbol], (_lift(a, kind, region), _lift(b, kind, region)), kind,
                     commutative=True)


def _invert(a):
    """~cond (not), or ~position (bitwise, -x - 1): xor with all ones."""
    region = _region_of(a)
    kind = _logic_kind("~", a)
    return region.op("arith.xori", (a, region.constant(True if kind == BOOL else -1, kind)), kind)


def _unary(op, name, exact_on_positions=False):
    """A math op on a float (a position is converted to float first, as torch does with
    integer tensors, except for rounding, which keeps a position as it is)."""
    def apply(x):
        region = _region_of(x)
        kind = _arith_kind(f"{name}()", x)
        if exact_on_positions and kind == INDEX:
            return x
        return region.op(op, (_lift(x, FLOAT, region),), FLOAT)
    apply.__name__ = name
    apply.__doc__ = f"{op} of x (symbolic)."
    return apply


exp = _unary("math.exp", "exp")
exp2 = _unary("math.exp2", "exp2")
expm1 = _unary("math.expm1", "expm1")
log = _unary("math.log", "log")
log1p = _unary("math.log1p", "log1p")
log2 = _unary("math.log2", "log2")
sqrt = _unary("math.sqrt", "sqrt")
rsqrt = _unary("math.rsqrt", "rsqrt")
tanh = _unary("math.tanh", "tanh")
sinh = _unary("math.sinh", "sinh")
cosh = _unary("math.cosh", "cosh")
sin = _unary("math.sin", "sin")
cos = _unary("math.cos", "cos")
atan = _unary("math.atan", "atan")
floor = _unary("math.floor", "floor", exact_on_positions=True)
ceil = _unary("math.ceil", "ceil", exact_on_positions=True)
trunc = _unary("math.trunc", "trunc", exact_on_positions=True)
round_half_even = _unary("math.roundeven", "round", exact_on_positions=True)


def _rounding(name, x, ndigits=None):
    if ndigits is not None:
        raise _error(f"round(x, {ndigits}): only round(x) is supported")
    return FUNCTIONS[name](x)


def sigmoid(x):
    """1 / (1 + exp(-x))."""
    region = _region_of(x)
    x = _lift(x, FLOAT, region)
    den = _add(1.0, exp(_neg(x)))
    return region.op("arith.divf", (region.constant(1.0, FLOAT), den), FLOAT,
                     hint=("sigmoid_{0}", (x,), "sigmoid"))


def softplus(x):
    """log(1 + exp(x)), written max(x, 0) + log1p(exp(-|x|)): exact at any |x|
    (-softplus(s) is stick-breaking's log-survival log(1 - sigmoid(s)))."""
    region = _region_of(x)
    x = _lift(x, FLOAT, region)
    return _add(relu(x), log1p(exp(_neg(_abs(x)))))


def relu(x):
    """max(x, 0)."""
    region = _region_of(x)
    kind = _arith_kind("relu()", x)
    x = _lift(x, kind, region)
    return region.op("arith.maximumf" if kind == FLOAT else "arith.maxsi",
                     (x, region.constant(0, kind)), kind, commutative=True,
                     hint=("relu_{0}", (x,), "relu"))


def clamp(x, min=None, max=None):  # noqa: A002 (torch.clamp's keywords)
    """minimum(maximum(x, min), max); either bound may be None (as torch.clamp)."""
    if min is not None:
        x = maximum(x, min)
    if max is not None:
        x = minimum(x, max)
    return x


def where(condition, a, b):
    """a where condition holds, else b (arith.select; torch.where). The condition is a
    comparison result; a and b are converted to their common type."""
    if isinstance(condition, bool):
        return a if condition else b
    region = _region_of(condition, a, b)
    if _kind(condition) != BOOL:
        raise _error("where(): the condition must be a comparison result (bool), got "
                     f"{_type_name(condition)}")
    kinds = {_kind(a), _kind(b)}
    kind = BOOL if kinds <= {BOOL, "bool"} else _arith_kind("where()", a, b)
    return region.op("arith.select",
                     (condition, _lift(a, kind, region), _lift(b, kind, region)), kind)


# Every function that works on symbolic values, by name (attn.<name>, torch.<name>,
# numpy.<name> reach these).
FUNCTIONS = {
    "exp": exp, "exp2": exp2, "expm1": expm1, "log": log, "log1p": log1p, "log2": log2,
    "sqrt": sqrt, "rsqrt": rsqrt, "tanh": tanh, "sinh": sinh, "cosh": cosh, "sin": sin, "cos": cos, "atan": atan,
    "floor": floor, "ceil": ceil, "trunc": trunc, "round": round_half_even, "abs": _abs,
    "sigmoid": sigmoid, "softplus": softplus, "relu": relu, "clamp": clamp, "clip": clamp, "where": where,
    "maximum": maximum, "minimum": minimum, "pow": _pow,
}
# attn.<name>: the functions without a Python builtin of their own (abs, round and pow are
# builtins that work on symbolic values).
_EXPORTED = [n for n in FUNCTIONS if n not in ("abs", "round", "pow", "clip")]
# What `attn` re-exports (Normalizer, Score, Mask, Value, ... stay in attn.frontend).
__all__ = ["normalizer", "score", "mask", "kernel", "tensor_input", "threshold", "KernelIR",
           "TraceError", *_EXPORTED]
_NUMPY_UFUNCS = {
    "add": _add, "subtract": _sub, "multiply": _mul, "divide": _truediv,
    "true_divide": _truediv, "floor_divide": _floordiv, "remainder": _mod, "power": _pow,
    "negative": _neg, "absolute": _abs, "arctan": atan, "rint": round_half_even,
    "less": operator.lt, "less_equal": operator.le, "greater": operator.gt,
    "greater_equal": operator.ge, "equal": operator.eq, "not_equal": operator.ne,
}


@functools.lru_cache(maxsize=None)
def _torch_functions():
    """torch function object -> implementation, for __torch_function__."""
    table = {}
    for name, impl in FUNCTIONS.items():
        for namespace in (torch, torch.special):
            func = getattr(namespace, name, None)
            if func is not None:
                table[func] = impl
    return table


# ----------------------------------------------------------------------------- tracing

def _trace(fn, kind, what, params):
    """Trace `fn` as a region of `kind`: its arguments are bound by name to the region's
    role arguments and params."""
    if not callable(fn):
        raise _error(f"{what}: expected a function, got {fn!r}")
    arguments = [*_ROLE_ARGS[kind], *((n, FLOAT) for n in params)]
    region = _Region(kind, what)
    region.source = _function_source(fn)
    values = {name: region.argument(name, type) for name, type in arguments}
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        raise _error(f"{what}: cannot read the signature of {fn!r}") from None
    kwargs = {}
    for p in signature.parameters.values():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) or p.name not in values:
            expected = ", ".join(values) or "nothing"
            raise _error(f"{what} {_describe(fn)} takes `{p}`, but its arguments are passed by "
                         f"name and are: {expected} (declare params with params=dict(name=value))",
                         region.source)
        kwargs[p.name] = values[p.name]
    stack = _tracing.__dict__.setdefault("regions", [])
    stack.append(region)
    try:
        result = _call_naming(fn, kwargs, region)
    finally:
        stack.pop()
        region.open = False
    region.result = _result(result, region, fn)
    return region


def _call_naming(fn, kwargs, region):
    """fn(**kwargs), recording which Python variables hold which values when each user
    function returns (the traced function's own variables win over its helpers')."""
    names, own = {}, fn.__code__ if hasattr(fn, "__code__") else None

    def profile(frame, event, arg):
        if event != "return" or _internal(frame.f_code.co_filename):
            return
        rank = 0 if frame.f_code is own else 1
        for var, value in frame.f_locals.items():
            if isinstance(value, Value) and value.region is region and \
                    names.get(id(value), (2,))[0] > rank:
                names[id(value)] = (rank, var)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        return fn(**kwargs)
    finally:
        sys.setprofile(previous)
        region.variable_names = {key: var for key, (_, var) in names.items()}


def _result(result, region, fn):
    """The value a region yields: a float (normalizer, score) or a condition (mask)."""
    want = BOOL if region.kind == "mask" else FLOAT
    where = region.source
    if result is None or not (isinstance(result, Value) or isinstance(result, numbers.Real)):
        raise _error(f"{region.what} {_describe(fn)} returned {result!r}; it must return "
                     + ("a condition (e.g. j <= i)" if want == BOOL else "a number"), where)
    if isinstance(result, Value) and result.region is not region:
        raise _error(f"{region.what} {_describe(fn)} returned a value of {result.region.what}",
                     where)
    kind = _kind(result)
    if want == BOOL and kind not in (BOOL, "bool"):
        raise _error(f"{region.what} {_describe(fn)} must return a condition (a comparison such "
                     f"as j <= i, combined with & | ~), got {_type_name(result)}", where)
    if want == FLOAT and kind in (BOOL, "bool"):
        raise _error(f"{region.what} {_describe(fn)} must return a number, got a condition; "
                     "use attn.where(cond, a, b)", where)
    return _lift(result, want, region)


# ---------------------------------------------------------------------------- printing

_SHORT = {
    "arith.addf": "add", "arith.addi": "add", "arith.subf": "sub", "arith.subi": "sub",
    "arith.mulf": "mul", "arith.muli": "mul", "arith.divf": "div", "arith.floordivsi": "floordiv",
    "arith.negf": "neg", "arith.maximumf": "max", "arith.maxsi": "max",
    "arith.minimumf": "min", "arith.minsi": "min", "arith.select": "select",
    "arith.andi": "and", "arith.ori": "or", "arith.xori": "xor", "math.absf": "abs",
    "math.absi": "abs", "math.powf": "pow", "math.roundeven": "round",
}
_CONSTANT_NAMES = {1.0: "one", 0.0: "zero", 2.0: "two", 0.5: "half", -1.0: "minus_one"}


def _ssa(text):
    """A valid SSA name (letters, digits, $ . _ -; not starting with a digit)."""
    text = re.sub(r"[^A-Za-z0-9_$.\-]", "_", text)
    return text if text and not text[0].isdigit() else "v" + text


def _derived_name(value, names):
    """%exp_s, %sub_i_j, %one, %c0.125, %le_j_i, ... from the op and its operands' names."""
    if value.op == "arith.constant":
        if value.type == FLOAT and float(value.attr) in _CONSTANT_NAMES and value.attr != "-0.0":
            return _CONSTANT_NAMES[float(value.attr)]
        return value.attr if value.type == BOOL else "c" + value.attr.replace("+", "")
    pattern, operands, fallback = value.hint or _default_hint(value)
    composed = pattern.format(*(names[id(x)] for x in operands))
    return composed if len(composed) <= 16 else fallback


def _default_hint(value):
    """(pattern, operands, fallback) naming an op after itself and its operands."""
    if value.op == "arith.index_cast":
        return "{0}_i64", value.operands, "i64"
    short = _SHORT.get(value.op, value.op.split(".")[1])
    if value.op in ("arith.cmpf", "arith.cmpi"):
        short = "ne" if value.attr in ("une", "ne") else value.attr.lstrip("ous")
    return short + "".join(f"_{{{k}}}" for k in range(len(value.operands))), value.operands, short


def _live(region):
    """The values the result depends on, constants first, each group in creation order."""
    seen, todo = set(), [region.result]
    while todo:
        value = todo.pop()
        if id(value) not in seen:
            seen.add(id(value))
            todo.extend(value.operands)
    live = [v for v in region.values if id(v) in seen]
    return sorted(live, key=lambda v: v.op != "arith.constant")   # (a stable sort)


def _structure(region):
    """The live ops of a region as (op, attr, type, operand positions), and the position
    of its result: equal for two regions that compute the same function the same way,
    whatever their names and Python lines."""
    position = {id(a): ("arg", n) for n, a in enumerate(region.arguments)}
    ops = []
    for value in _live(region):
        position[id(value)] = len(ops)
        ops.append((value.op, value.attr, value.type,
                    tuple(position[id(x)] for x in value.operands)))
    return ops, position[id(region.result)]


def _op_text(value, names):
    name = lambda x: "%" + names[id(x)]
    args = ", ".join(map(name, value.operands))
    if value.op == "arith.constant":
        typed = "" if value.type == BOOL else f" : {_MLIR_TYPE[value.type]}"
        return f"arith.constant {value.attr}{typed}"
    if value.op in ("arith.cmpf", "arith.cmpi"):
        return f"{value.op} {value.attr}, {args} : {_MLIR_TYPE[value.operands[0].type]}"
    if value.op in ("arith.index_cast", "arith.sitofp"):
        source, target = _MLIR_TYPE[value.operands[0].type], _MLIR_TYPE[value.type]
        return f"{value.op} {args} : {source} to {target}"
    if value.op == "attn.read":
        return f"attn.read @{value.attr.name}[{args}] : {_MLIR_TYPE[value.type]}"
    return f"{value.op} {args} : {_MLIR_TYPE[value.type]}"


class _Printer:
    """Collects the Python locations of a module as aliases #<file>_<line>_<col>."""

    def __init__(self):
        self.aliases = {}

    def loc(self, where):
        if where not in self.aliases:
            filename, line, col = where
            stem = os.path.splitext(os.path.basename(filename))[0]
            stem = re.sub(r"\W", "_", stem, flags=re.ASCII).strip("_") or "py"
            base = _ssa(f"{stem}_{line}_{col}")
            alias, n = base, 1
            while alias in self.aliases.values():
                n += 1
                alias = f"{base}_{n}"
            self.aliases[where] = alias
        return f"loc(#{self.aliases[where]})"

    def definitions(self):
        quote = lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return [f"#{alias} = loc({quote(f)}:{line}:{col})"
                for (f, line, col), alias in self.aliases.items()]

    def region(self, region, indent):
        """The lines of one region: its Python source as a comment, the block, the ops."""
        filename, line, text = region.source
        lines = [f"{indent}// {os.path.basename(filename)}:{line}" + (":" if text else "")]
        if text:
            code = text.splitlines()
            if len(code) == 1:
                lines[0] += " " + code[0]
            else:
                lines += [f"{indent}//   {c}" for c in code]
        names, used = {}, set()

        def take(base):
            base, n = _ssa(base), 1
            candidate = base
            while candidate in used:
                candidate = f"{base}_{n}"
                n += 1
            used.add(candidate)
            return candidate

        for argument in region.arguments:
            names[id(argument)] = take(argument.attr)
        arguments = ", ".join(f"%{names[id(a)]}: {_MLIR_TYPE[a.type]}" for a in region.arguments)
        lines.append(f"{indent}^bb0({arguments}):")
        for value in _live(region):
            var = region.variable_names.get(id(value))
            if var is not None and not (var.isascii() and var.isidentifier()):
                var = None
            if var is None and value is region.result:
                var = _RESULT_NAME[region.kind]
            names[id(value)] = take(var or _derived_name(value, names))
            lines.append(f"{indent}  %{names[id(value)]} = {_op_text(value, names)} "
                         f"{self.loc(value.loc)}")
        result = region.result
        where = result.loc or (filename, line, 1)
        lines.append(f"{indent}  attn.yield %{names[id(result)]} : {_MLIR_TYPE[result.type]} "
                     f"{self.loc(where)}")
        return lines


# -------------------------------------------------------------------------- the symbols

_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*\Z")


def _symbol_name(name, what):
    if not isinstance(name, str) or not _SYMBOL.match(name):
        raise _error(f"{what}: name={name!r} is not a symbol name (letters, digits, _ $ .; "
                     "not starting with a digit)")
    return name


def _params(params, what, taken):
    """params as an ordered {name: float}; names are Python identifiers, distinct from the
    region's other arguments."""
    params = dict(params or {})
    for name, value in params.items():
        if not (isinstance(name, str) and name.isidentifier() and name.isascii()):
            raise _error(f"{what}: param name {name!r} is not an ASCII Python identifier (the "
                         "functions take params as arguments by name)")
        if name in taken:
            raise _error(f"{what}: param {name!r} has the name of a region argument "
                         f"({', '.join(taken)})")
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise _error(f"{what}: param {name} = {value!r}: expected its initial value, a number")
        _float_literal(value, f"param {name} =")
    return {name: float(value) for name, value in params.items()}


def _header_params(params):
    return (" params(" + ", ".join(f"{n} = {_float_literal(v)}" for n, v in params.items()) + ")"
            if params else "")


class Traced:
    """A traced symbol: str() is its IR (with the Python locations it refers to)."""

    def __str__(self):
        printer = _Printer()
        lines = self._lines(printer)
        return "\n".join(lines + [""] + printer.definitions()) + "\n"

    text = property(__str__, doc="The IR text (an MLIR module attn-opt reads).")

    def save(self, path):
        """Write the IR text to `path` (e.g. for attn-opt or attn-compile); returns path."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(str(self))
        return path


class Normalizer(Traced):
    """attn.normalizer(...): the numerator g, the denominator C_i and the params."""

    def __init__(self, name, params, numerator, denominator, epsilon, offset, loc,
                 left_over=None):
        self.name, self.params, self.numerator = name, params, numerator
        self.denominator, self.epsilon, self.offset, self.loc = denominator, epsilon, offset, loc
        self.left_over = left_over

    def _lines(self, printer):
        lines = [f"attn.normalizer @{self.name}{_header_params(self.params)} {{", "  numerator {"]
        lines += printer.region(self.numerator, "  ") + ["  }"]
        eps = f"epsilon {_float_literal(self.epsilon)} " if self.epsilon is not None else ""
        if isinstance(self.denominator, _Region) and self.denominator.kind == "log_survival":
            lines.append("  denominator log_survival {")
            left_over = f" left_over {self.left_over}" if self.left_over else ""
            lines += printer.region(self.denominator, "  ") + [f"  }}{left_over}"]
        elif isinstance(self.denominator, _Region):
            lines.append(f"  denominator {eps}{{")
            lines += printer.region(self.denominator, "  ") + ["  }"]
        elif self.denominator == "sum":
            lines.append(f"  denominator {eps}sum")
        elif self.denominator == "count":
            lines.append("  denominator count")
        elif isinstance(self.denominator, Threshold):
            lines.append(f"  denominator threshold {_float_literal(self.denominator.c)}")
        else:
            lines.append(f"  denominator constant {_float_literal(self.denominator)}")
        if self.offset is not None:
            lines += ["  offset {"] + printer.region(self.offset, "  ") + ["  }"]
        return lines + [f"}} {printer.loc(self.loc)}"]

    def __repr__(self):
        return f"<attn.Normalizer @{self.name} params={list(self.params)}>"


class Threshold:
    """denominator=attn.threshold(c): the weights are the numerator at s_ij - tau_i, with
    tau_i such that they sum to c over the row's keys (an implicit normalizer)."""

    def __init__(self, c):
        self.c = c

    def __repr__(self):
        return f"attn.threshold({self.c!r})"


def threshold(c=1.0):
    """The denominator of an implicit normalizer (sparsemax, entmax): w_ij = g(s_ij - tau_i)
    with tau_i the root of sum_j g(s_ij - tau_i) = c, c > 0; g must be 0 for arguments
    <= 0 and non-decreasing (docs/normalizer-classes.md):

        attn.normalizer(numerator=lambda s: attn.relu(s), denominator=attn.threshold(1.0),
                        name="sparsemax")"""
    if isinstance(c, bool) or not isinstance(c, numbers.Real) or not c > 0:
        raise _error(f"attn.threshold({c!r}): expected a number c > 0, the sum of a row's "
                     "weights")
    _float_literal(c, "threshold")
    return Threshold(float(c))


class Score(Traced):
    """attn.score(...): the contraction, an optional feature map and mod, params, weights."""

    def __init__(self, name, contract, header, params, feature, mod, loc):
        self.name, self.contract, self.header, self.params = name, contract, header, params
        self.feature, self.mod, self.loc = feature, mod, loc

    def _lines(self, printer):
        lines = [f"attn.score @{self.name} contract {self.contract}{self.header}"]
        for keyword, region in (("feature", self.feature), ("mod", self.mod)):
            if region is not None:
                lines[-1] += f" {keyword} {{"
                lines += printer.region(region, "") + ["}"]
        lines[-1] += f" {printer.loc(self.loc)}"
        return lines

    def __repr__(self):
        return f"<attn.Score @{self.name} contract {self.contract} params={list(self.params)}>"


class Mask(Traced):
    """attn.mask(...): which (i, j) pairs are kept."""

    def __init__(self, name, body, loc):
        self.name, self.body, self.loc = name, body, loc

    def _lines(self, printer):
        return ([f"attn.mask @{self.name} {{"] + printer.region(self.body, "")
                + [f"}} {printer.loc(self.loc)}"])

    def __repr__(self):
        return f"<attn.Mask @{self.name}>"


_INPUT_ELEMENTS = {"float": FLOAT, "i8": "i8", "i32": "i32", "i64": I64}


class TensorInput:
    """attn.tensor_input(...): a tensor passed at the call (attn.input) that the traced
    functions read by indexing it with positions. A float input reads as a float value,
    an integer one as a position (index value)."""

    def __init__(self, name, shape, dtype, learnable, init, loc):
        self.name, self.shape, self.dtype, self.learnable = name, shape, dtype, learnable
        self.init, self.loc = init, loc

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if len(key) != len(self.shape):
            raise _error(f"{self!r} has {len(self.shape)} dims but is read with {len(key)} "
                         "indices (one position per dim)")
        region = _region_of(*key)
        indices = []
        for k in key:
            if _kind(k) not in (INDEX, "int"):
                raise _error(f"{self!r} is read at {_type_name(k)}; its indices are positions "
                             "(b, h, i, j and integer arithmetic on them)")
            indices.append(k if isinstance(k, Value) else region.constant(k, INDEX))
        if self not in region.reads:
            region.reads.append(self)
        element = _INPUT_ELEMENTS[self.dtype]
        value = region.op("attn.read", tuple(indices), element, self,
                          hint=(self.name, (), self.name))
        return value if element == FLOAT else region.op("arith.index_cast", (value,), INDEX)

    def declaration(self, printer):
        extents = "x".join(str(e) if isinstance(e, int) else "?" for e in self.shape)
        element = _FLOAT_TYPE if self.dtype == "float" else self.dtype
        learnable = " learnable" if self.learnable else ""
        init = f" = {_float_literal(self.init)}" if self.init is not None else ""
        named = any(e in CALL_DIMS for e in self.shape)
        dims = (" dims(" + ", ".join("?" if e is None else str(e) for e in self.shape) + ")"
                if named else "")
        return (f"attn.input @{self.name}{learnable}{init} : tensor<{extents}x{element}>{dims} "
                f"{printer.loc(self.loc)}")

    def __repr__(self):
        return f"<attn.tensor_input @{self.name} {self.dtype}{list(self.shape)}>"


def tensor_input(name, shape, dtype="float", *, learnable=False, init=None):
    """A tensor input (attn.input) of the kernels that read it: `shape` one extent per dim
    (1 to 4 dims), each a dimension of the call ("B", "H", "Hkv", "Nq", "Nk": the runtime
    checks it at every call), a positive integer, or None (any); dtype "float" (the
    kernel's float type: the dtype of q at the call) or "i8", "i32", "i64"; learnable
    (float only): it gets a gradient; init (learnable only): the initial value of every
    element where attn.MultiheadAttention creates the input as a parameter (default 0).
    Read it in a traced function by indexing with positions, e.g. slopes[h] or doc[b, i];
    out-of-range positions are clamped. At the call, pass it as inputs={name: tensor}."""
    loc = _here()
    name = _symbol_name(name, "attn.tensor_input")
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if not 1 <= len(shape) <= 4 or any(
            e is not None and e not in CALL_DIMS
            and (not isinstance(e, numbers.Integral) or isinstance(e, bool) or e < 1)
            for e in shape):
        raise _error(f"attn.tensor_input @{name}: shape={shape!r}: expected 1 to 4 extents, "
                     f"each one of {', '.join(CALL_DIMS)} (that dimension of the call), a "
                     "positive integer or None (any)")
    shape = tuple(int(e) if isinstance(e, numbers.Integral) else e for e in shape)
    if dtype not in _INPUT_ELEMENTS:
        raise _error(f"attn.tensor_input @{name}: dtype={dtype!r}: expected one of "
                     f"{', '.join(_INPUT_ELEMENTS)}")
    if learnable and dtype != "float":
        raise _error(f"attn.tensor_input @{name}: only float inputs are learnable")
    if init is not None:
        if not learnable:
            raise _error(f"attn.tensor_input @{name}: init={init!r} needs learnable=True (a "
                         "module creates only learnable inputs as parameters)")
        init = float(_float_literal(init, f"attn.tensor_input @{name}: init ="))
    return TensorInput(name, shape, dtype, bool(learnable), init, loc)


class KernelIR(Traced):
    """attn.kernel(...): a whole module (score, mask, normalizer, kernel). str() is the IR;
    attn.compile, attn.MultiheadAttention(normalizer=...) and attn.attention take it."""

    def __init__(self, name, normalizer, score, mask, loc):
        self.name, self.normalizer, self.score, self.mask = name, normalizer, score, mask
        self.loc = loc

    def _lines(self, printer):
        filename, line, _ = self.loc
        lines = [f"// attn IR traced by attn.kernel at {os.path.basename(filename)}:{line}; "
                 "loc(...) are the Python source positions."]
        refs = f"normalizer(@{self.normalizer.name})"
        inputs = []
        for part in (self.score, self.mask, self.normalizer):
            for region in _regions_of(part):
                inputs += [t for t in region.reads if t not in inputs]
        lines += [t.declaration(printer) for t in inputs] + ([""] if inputs else [])
        for part, keyword in ((self.score, "score"), (self.mask, "mask")):
            if part is not None:
                lines += part._lines(printer) + [""]
                refs += f" {keyword}(@{part.name})"
        lines += self.normalizer._lines(printer) + [""]
        return lines + [f"attn.kernel @{self.name} {refs} {printer.loc(self.loc)}"]

    def compile(self, **options):
        """attn.compile(self, **options): the compiled, loaded attn.Kernel."""
        from .compiler import compile as compile_ir

        return compile_ir(self, **options)

    def __repr__(self):
        parts = [repr(p) for p in (self.normalizer, self.score, self.mask) if p is not None]
        return f"<attn.KernelIR @{self.name}: {', '.join(parts)}>"


def normalizer(numerator, denominator=None, *, epsilon=None, offset=None, params=None,
               name="normalizer", log_survival=None, left_over=None):
    """An attn.normalizer from Python functions:

        attn.normalizer(numerator=lambda s: exp(s) - exp(-s),
                        denominator=lambda s: exp(s) + exp(-s), name="tanhmax")

    numerator: g(s, b, h, i, j, params...), any subset by name. denominator: a function
    h(s, b, h, i, j, params...) (C_i = Σ_j h, plus `epsilon` if given), "sum" (h = g,
    written `denominator sum`, as is a function that traces to the numerator's ops), a
    number c (C_i = c), "count" (the number of unmasked keys) or attn.threshold(c) (an
    implicit normalizer: w_ij = g(s_ij - tau_i), tau_i such that the row sums to c).
    offset: a function β(b, h, i, params...) added to a summed denominator, C_i = β + Σ_j h
    (e.g. lambda h: exp(sinks[h]) for attention sinks; a constant is `epsilon`).
    params: {name: initial value}, learnable; the functions take them as arguments by name
    (any subset, any order).
    log_survival: instead of a denominator, a scan normalizer (docs/normalizer-classes.md):
    d(s, b, h, i, j, params...) <= 0, w_ij = g(s_ij)·exp(Σ_{k kept, k > j} d(s_ik));
    stick-breaking is numerator=lambda s: sigmoid(s), log_survival=lambda s: -softplus(s).
    left_over="current" adds what no key took, r_i·v_i (the paper's model)."""
    loc = _here()
    name = _symbol_name(name, "attn.normalizer")
    what = f"attn.normalizer @{name}"
    params = _params(params, what, _ARGUMENT_NAMES)
    num = _trace(numerator, "numerator", f"the numerator of {what}", params)
    if log_survival is not None or left_over is not None:
        return _scan_normalizer(name, what, params, num, denominator, epsilon, offset,
                                log_survival, left_over, loc)
    summed = callable(denominator) or denominator == "sum"
    if summed:
        den = "sum"
        if callable(denominator):
            traced = _trace(denominator, "denominator", f"the denominator of {what}", params)
            if _structure(traced) != _structure(num):
                den = traced
        if epsilon is not None:
            _float_literal(epsilon, "epsilon")
    elif epsilon is not None:
        raise _error(f"{what}: epsilon= is added to a summed denominator (a function h), but "
                     f"the denominator is {denominator!r}")
    elif isinstance(denominator, Threshold):
        den = denominator
    elif denominator == "count":
        den = "count"
    elif isinstance(denominator, numbers.Real) and not isinstance(denominator, bool):
        den = float(denominator)
        _float_literal(den, "denominator constant")
    else:
        raise _error(f"{what}: denominator={denominator!r}: expected a function h(s, ...), "
                     "\"sum\" (h = the numerator), a number (a constant C_i), \"count\" or "
                     "attn.threshold(c) (or log_survival= for a scan normalizer)")
    if offset is not None:
        if not summed:
            raise _error(f"{what}: offset= is added to a summed denominator (a function h), "
                         f"but the denominator is {denominator!r}")
        offset = _trace(offset, "offset", f"the offset of {what}", params)
    return Normalizer(name, params, num, den, epsilon, offset, loc)


def _scan_normalizer(name, what, params, num, denominator, epsilon, offset, log_survival,
                     left_over, loc):
    for given, keyword in ((denominator, "denominator"), (epsilon, "epsilon"),
                           (offset, "offset")):
        if given is not None:
            raise _error(f"{what}: {keyword}= and log_survival= exclude each other: a scan "
                         "normalizer has no denominator (its weights are discounted by the "
                         "survivals of the keys after them)")
    if not callable(log_survival):
        raise _error(f"{what}: left_over= applies to a scan normalizer; expected "
                     "log_survival=, a function d(s, ...) <= 0 (stick-breaking: "
                     f"lambda s: -softplus(s)), got {log_survival!r}")
    if left_over not in (None, "current"):
        raise _error(f"{what}: left_over={left_over!r}: expected \"current\" (r_i·v_i, the "
                     "value at the query's position) or None (dropped)")
    survival = _trace(log_survival, "log_survival", f"the log_survival of {what}", params)
    return Normalizer(name, params, num, survival, None, None, loc, left_over)


def score(contract="scaled_dot", *, mod=None, feature=None, scale=None, hidden=None,
          params=None, weights=None, name="score", row_inputs=None):
    """An attn.score: contract is one of dot, scaled_dot, bilinear, additive, cosine.

        attn.score(mod=lambda s, i, j, slope: s - slope * abs(i - j), params=dict(slope=0.25))

    mod(s, b, h, i, j, params...): the final score from the contracted value s and the
    batch, head, query and key indices (by name, any subset); it may read tensor inputs
    (attn.tensor_input). feature(x): a map applied to every entry of q and k (dot,
    scaled_dot). scale: a float; hidden: the additive contraction's width; weights: {name:
    (shape, "identity" or a fill value)}, e.g. {"W": ((64, 64), "identity")}."""
    loc = _here()
    name = _symbol_name(name, "attn.score")
    what = f"attn.score @{name}"
    if contract not in _CONTRACTS:
        raise _error(f"{what}: contract={contract!r}: expected one of {', '.join(_CONTRACTS)}")
    header = ""
    if scale is not None:
        header += f" scale {_float_literal(scale, 'scale')}"
    if hidden is not None:
        if not isinstance(hidden, numbers.Integral) or hidden <= 0:
            raise _error(f"{what}: hidden={hidden!r}: expected a positive integer")
        header += f" hidden {int(hidden)}"
    if row_inputs is not None:
        raise _error(f"{what}: row_inputs= is retired: declare the input, e.g. p = "
                     "attn.tensor_input(\"p\", (None, None, None), learnable=True), and read it "
                     "in the mod: lambda s, b, h, i, j: ... p[b, h, i] ...")
    params = _params(params, what, _ARGUMENT_NAMES)
    header += _header_params(params)
    if weights:
        header += " weights(" + ", ".join(_weight(what, n, w) for n, w in weights.items()) + ")"
    if feature is not None:
        feature = _trace(feature, "feature", f"the feature map of {what}", {})
    if mod is not None:
        mod = _trace(mod, "mod", f"the mod of {what}", params)
    return Score(name, contract, header, params, feature, mod, loc)


def _weight(what, name, spec):
    """`W: 64x64 = identity` from ("W", ((64, 64), "identity"))."""
    try:
        shape, init = spec
        dims = [int(d) for d in ((shape,) if isinstance(shape, numbers.Integral) else shape)]
    except (TypeError, ValueError):
        dims, init = [], None
    if not dims or min(dims) <= 0 or not (isinstance(name, str) and _SYMBOL.match(name)):
        raise _error(f"{what}: weight {name!r}: {spec!r}: expected name: (shape, init), e.g. "
                     "W=((64, 64), \"identity\") or v=(32, 0.1)")
    if init == "identity":
        literal = "identity"
    elif isinstance(init, numbers.Real) and not isinstance(init, bool):
        literal = _float_literal(init, f"weight {name} fill")
    else:
        raise _error(f"{what}: weight {name}: init {init!r}: expected \"identity\" or a number")
    return f"{name}: {'x'.join(map(str, dims))} = {literal}"


def mask(keep, *, name="mask"):
    """An attn.mask from keep(b, h, i, j) -> condition (any subset of the indices, by name),
    e.g. attn.mask(lambda i, j: j <= i)."""
    loc = _here()
    name = _symbol_name(name, "attn.mask")
    return Mask(name, _trace(keep, "mask", f"attn.mask @{name}", {}), loc)


def kernel(normalizer, score=None, mask=None, *, name=None):
    """The IR of a kernel (attn.KernelIR): `normalizer` (attn.normalizer), an optional
    `score` (attn.score, or a function mod(s, i, j, ...) for a scaled_dot score; default
    q·k/sqrt(d)) and an optional `mask` (attn.mask, or a function keep(i, j)).
    name defaults to <normalizer name>_attention."""
    loc = _here()
    if not isinstance(normalizer, Normalizer):
        raise _error(f"attn.kernel: normalizer={normalizer!r}: expected an attn.normalizer(...)")
    if score is not None and not isinstance(score, Score):
        if not callable(score):
            raise _error(f"attn.kernel: score={score!r}: expected an attn.score(...) or a "
                         "function mod(s, i, j)")
        score = _make_score(mod=score)
    if mask is not None and not isinstance(mask, Mask):
        if not callable(mask):
            raise _error(f"attn.kernel: mask={mask!r}: expected an attn.mask(...) or a "
                         "function keep(i, j)")
        mask = _make_mask(mask)
    name = _symbol_name(name or f"{normalizer.name}_attention", "attn.kernel")
    return KernelIR(name, normalizer, score, mask, loc)


_make_score, _make_mask = score, mask


def _regions_of(part):
    """The traced regions of a Normalizer, Score or Mask (none for None)."""
    if isinstance(part, Normalizer):
        return [r for r in (part.numerator, part.denominator, part.offset)
                if isinstance(r, _Region)]
    if isinstance(part, Score):
        return [r for r in (part.feature, part.mod) if r is not None]
    return [part.body] if isinstance(part, Mask) else []


def kernel_ir(source):
    """The KernelIR of a traced kernel or normalizer (compiled with the default score), for
    attn.compile; None for anything else."""
    if isinstance(source, KernelIR):
        return source
    if isinstance(source, Normalizer):
        return kernel(source)
    if isinstance(source, (Score, Mask)):
        raise _error(f"{source!r} is not a kernel: pass attn.kernel(normalizer, score=..., "
                     "mask=...)")
    return None
