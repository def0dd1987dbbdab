"""New rows made to fit an index's columns before `add` stores them, or refused in one line.

An add must never change what a value means: a CSV's `01` is not the integer id `1` (it
would replace row 1), a timestamp is not a year, and the corpus's text column is the
index's text column whatever its name there. Values of another type are read as the
index's only where nothing is lost: a text file (CSV, TSV) has no types, so its values are
read as the index's type when they convert and write back exactly (`2005` to 2005, never
`02005`); integers of another width that fit. Anything else is refused, unless the user
asks (`convert=True`, `--convert-types`) and each value converts without loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from semsearch.errors import SemsearchError
from semsearch.store.segment import RESERVED_COLUMNS

TEXT_FORMATS = ("csv", "tsv")


@dataclass(frozen=True)
class Target:
    """The index the rows go into: its name, columns (all segments together) and id column."""

    name: str
    schema: pa.Schema
    text_column: str
    id_column: str | None


def index_schema(schemas: list[pa.Schema]) -> pa.Schema:
    """Every segment's columns as one schema (a column added later is in the later ones only)."""
    fields: dict[str, pa.DataType] = {}
    for schema in schemas:
        for field in schema:
            if field.name in RESERVED_COLUMNS:
                continue
            if field.name not in fields or pa.types.is_null(fields[field.name]):
                fields[field.name] = field.type
    return pa.schema(list(fields.items()))


def rename_text_column(
    rows: pa.Table, text_column: str, target: Target, path_name: str
) -> pa.Table:
    """The corpus's text column under the index's name, so the rows are stored with their text."""
    if text_column == target.text_column:
        return rows
    if target.text_column in rows.column_names:
        raise SemsearchError(
            f"{path_name} has both {text_column!r} (--text-column) and {target.text_column!r}, "
            f"index {target.name!r}'s text column: drop or rename one of them"
        )
    names = [target.text_column if name == text_column else name for name in rows.column_names]
    return rows.rename_columns(names)


def conform(rows: pa.Table, target: Target, source_format: str, convert: bool = False) -> pa.Table:
    """`rows` with the index's column types; see the module docstring for what converts."""
    for position, name in enumerate(rows.column_names):
        if name not in target.schema.names:
            continue  # a new column: the index's schema grows, earlier rows hold null
        old, new = target.schema.field(name).type, rows.schema.field(name).type
        if old == new or pa.types.is_null(old):
            continue
        column = rows.column(name).combine_chunks()
        from_text = source_format in TEXT_FORMATS
        converted = convert_column(column, old, from_text, convert)
        if isinstance(converted, str):
            raise SemsearchError(_refusal(name, column, old, converted, target, from_text, convert))
        rows = rows.set_column(position, name, converted)
    return rows


def convert_column(
    column: pa.Array, old: pa.DataType, from_text: bool, convert: bool = False
) -> pa.Array | str:
    """The column as type `old`, or the value (as text) that cannot become one without loss."""
    new = column.type
    if pa.types.is_null(new):
        return pa.nulls(len(column), old)
    if pa.types.is_dictionary(new):
        column, new = column.cast(new.value_type), new.value_type
    if _temporal(old) != _temporal(new) and not _is_string(new):
        return _first_value(column)  # a timestamp is not a number, whatever the option says
    if not (_same_kind(old, new) or convert or (from_text and _is_string(new))):
        return _first_value(column)
    try:
        cast = pc.cast(column, old, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return _first_bad(column, old)
    if convert and _is_string(new):
        return cast  # asked for: "01" is read as 1
    try:
        back = pc.cast(cast, new, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return _first_value(column)
    try:
        differs = pc.fill_null(pc.not_equal(back, column), False)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):  # lists, structs: no comparison
        return _first_value(column)
    if pa.types.is_floating(new):  # NaN is never equal to itself, yet converts without loss
        differs = pc.and_(differs, pc.invert(pc.fill_null(pc.is_nan(column), False)))
    if pc.any(differs).as_py():
        return str(column[pc.index(differs, True).as_py()].as_py())
    return cast


def _first_bad(column: pa.Array, old: pa.DataType) -> str:
    """The first value pyarrow cannot convert to `old`."""
    for value in column:
        try:
            pc.cast(pa.array([value.as_py()], column.type), old, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return str(value.as_py())
    return _first_value(column)


def _first_value(column: pa.Array) -> str:
    valid = column.drop_null()
    return str(valid[0].as_py()) if len(valid) else "null"


def _refusal(
    name: str,
    column: pa.Array,
    old: pa.DataType,
    value: str,
    target: Target,
    from_text: bool,
    convert: bool,
) -> str:
    role = "id column" if name == target.id_column else "column"
    found = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    fix = (
        "write the ids as the index holds them, or build a new index for these ids"
        if name == target.id_column
        else f"write it as {old} in the file, or give it another name to add it as a new column"
    )
    if not convert and not isinstance(convert_column(column, old, from_text, True), str):
        fix += f", or pass --convert-types to read these values as {old}"
    if _temporal(old) != _temporal(found) and not _is_string(found):
        why = "a date or time is not a number"
    elif not (convert or _same_kind(old, found) or (from_text and _is_string(found))):
        why = f"{found} values (such as {value!r}) are not read as {old} unless asked"
    else:
        why = f"{value!r} would not stay itself as {old}"
    return (
        f"{role} {name!r} holds {found} where index {target.name!r} holds {old}, and {why}: {fix}"
    )


def _same_kind(old: pa.DataType, new: pa.DataType) -> bool:
    """Text and text, integers and integers, floats and floats: a cast that keeps meaning."""
    return (
        (_is_string(old) and _is_string(new))
        or (pa.types.is_integer(old) and pa.types.is_integer(new))
        or (pa.types.is_floating(old) and pa.types.is_floating(new))
    )


def _is_string(data_type: pa.DataType) -> bool:
    return pa.types.is_string(data_type) or pa.types.is_large_string(data_type)


def _temporal(data_type: pa.DataType) -> bool:
    return pa.types.is_temporal(data_type)
