"""The local model's word-embedding lookup, rewritten so that its table stays int8 in memory.

The int8 model stores each weight as int8 values and a scale, which a Cast and a Mul in the graph
turn back into float32. onnxruntime folds those constants when it loads the model, so it holds
every weight as float32: 47 MB of that is the word-embedding table (30522 × 384), of which a call
reads a few rows. Gathering the rows first and then casting and scaling them computes the same
floats (each element is the same one multiplication) from the 12 MB int8 table: about 34 MiB less
in each process that embeds. The other weights are read whole by every call, so they stay folded.

The rewrite edits protobuf's wire format directly (the onnx package is not a dependency): the
graph's nodes are length-delimited fields, and every other field is copied byte for byte.
"""

from collections.abc import Iterator

from memvm.embeddings.ports import EmbeddingModelError

TABLE = "inner.embeddings.word_embeddings.weight"  # the folded float table; TABLE + "_q", "_scale": its parts
# Field numbers of onnx.proto: ModelProto.graph, GraphProto.node, and NodeProto's.
_GRAPH, _NODE = 7, 1
_INPUT, _OUTPUT, _NAME, _OP_TYPE = 1, 2, 3, 4
_LENGTH_DELIMITED = 2  # a wire type


def gather_rows_first(model: bytes) -> bytes:
    """`model` with Gather(Mul(Cast(table_q), scale), ids) replaced by Mul(Cast(Gather(table_q, ids)),
    Gather(scale, ids)); EmbeddingModelError if its graph has no such lookup."""
    rewritten = bytearray()
    for number, payload, raw in _fields(model):
        rewritten += _field(_GRAPH, _rewritten_graph(payload)) if number == _GRAPH and payload is not None else raw
    return bytes(rewritten)


def _rewritten_graph(graph: bytes) -> bytes:
    nodes = [payload for number, payload, _ in _fields(graph) if number == _NODE and payload is not None]
    by_output = {_strings(node, _OUTPUT)[0]: node for node in nodes}
    cast, scaling = by_output.get(TABLE + "_f"), by_output.get(TABLE)
    lookups = [node for node in nodes if _op(node) == "Gather" and _strings(node, _INPUT)[0] == TABLE]
    if cast is None or scaling is None or len(lookups) != 1:
        raise EmbeddingModelError(f"The embedding model's graph has no lookup in {TABLE!r} made from int8 values and a scale")
    [lookup] = lookups
    ids, embedded = _strings(lookup, _INPUT)[1], _strings(lookup, _OUTPUT)[0]
    rows_first = [
        _rewired(lookup, [TABLE + "_q", ids], TABLE + ".rows_q"),
        _rewired(lookup, [TABLE + "_scale", ids], TABLE + ".rows_scale"),
        _rewired(cast, [TABLE + ".rows_q"], TABLE + ".rows_f"),
        _rewired(scaling, [TABLE + ".rows_f", TABLE + ".rows_scale"], embedded),
    ]
    rewritten = bytearray()
    for number, payload, raw in _fields(graph):
        if number != _NODE or payload not in (lookup, cast, scaling):
            rewritten += raw
        elif payload == lookup:  # the new nodes where the lookup was: the list stays in topological order
            rewritten += b"".join(_field(_NODE, node) for node in rows_first)
    return bytes(rewritten)


def _rewired(node: bytes, inputs: list[str], output: str) -> bytes:
    """A copy of `node` (its op and attributes) reading `inputs` into `output`, named after it."""
    kept = b"".join(raw for number, _, raw in _fields(node) if number not in (_INPUT, _OUTPUT, _NAME))
    wiring = [*(_field(_INPUT, name.encode()) for name in inputs), _field(_OUTPUT, output.encode())]
    return b"".join(wiring) + _field(_NAME, output.encode()) + kept


def _op(node: bytes) -> str:
    return _strings(node, _OP_TYPE)[0]


def _strings(message: bytes, number: int) -> list[str]:
    return [payload.decode() for field, payload, _ in _fields(message) if field == number and payload is not None]


def _fields(message: bytes) -> Iterator[tuple[int, bytes | None, bytes]]:
    """Each field of a protobuf message: its number, its payload if length-delimited, its raw bytes."""
    at = 0
    while at < len(message):
        start = at
        key, at = _read_varint(message, at)
        payload = None
        match key & 7:
            case 0:  # varint
                _, at = _read_varint(message, at)
            case 1:  # 64-bit
                at += 8
            case 2:  # length-delimited
                size, at = _read_varint(message, at)
                payload, at = message[at : at + size], at + size
            case 5:  # 32-bit
                at += 4
            case wire_type:
                raise EmbeddingModelError(f"The embedding model is not a protobuf message (wire type {wire_type})")
        yield key >> 3, payload, message[start:at]


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def _varint(value: int) -> bytes:
    encoded = bytearray()
    while value > 0x7F:
        encoded.append(value & 0x7F | 0x80)
        value >>= 7
    encoded.append(value)
    return bytes(encoded)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | _LENGTH_DELIMITED) + _varint(len(payload)) + payload
