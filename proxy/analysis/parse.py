"""SQL text → sqlglot trees, in the PostgreSQL dialect clients speak."""

from __future__ import annotations

import logging
from typing import ClassVar

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from proxy.errors import ProgramLimitExceededError, QuerySyntaxError

# sqlglot logs a warning whenever it falls back to a generic Command node (SHOW, RESET …); those
# statements are expected here, so the warning would only be noise in the server log.
logging.getLogger("sqlglot").setLevel(logging.ERROR)


class _ClientPostgres(Postgres):
    """PostgreSQL as clients send it: sqlglot's dialect, plus the session commands it does not know.
    Without this, ``DISCARD ALL`` (sent by connection pools) would parse as a column with an alias."""

    class Tokenizer(Postgres.Tokenizer):
        KEYWORDS: ClassVar[dict[str, TokenType]] = {
            **Postgres.Tokenizer.KEYWORDS,
            "DISCARD": TokenType.COMMAND,
            "DEALLOCATE": TokenType.COMMAND,
            "SAVEPOINT": TokenType.COMMAND,  # psycopg nests transaction() blocks in savepoints
            "RELEASE": TokenType.COMMAND,
            # oid, regclass, regtype … as plain type names: sqlglot cannot parse arrays of them, which
            # asyncpg's type introspection binds ($1::oid[]) and pgcli casts to (regtype[])
            **{
                word: TokenType.VAR
                for word, token in Postgres.Tokenizer.KEYWORDS.items()
                if token == TokenType.OBJECT_IDENTIFIER
            },
        }


def parse_statements(sql: str, *, max_tokens: int | None = None) -> list[exp.Expression]:
    """All statements of a simple-query string; empty statements (``;;``) are dropped.

    ``max_tokens``: a text of more tokens is refused (54001) before it is parsed — tokenizing is linear,
    but sqlglot's parser is not (a 20,000-term OR chain takes a second and far more memory), and a
    statement that large is over any dataset's complexity budget anyway."""
    dialect = _ClientPostgres()
    try:
        tokens = dialect.tokenize(sql)
        if max_tokens is not None and len(tokens) > max_tokens:
            raise ProgramLimitExceededError(
                f"statement too long: {len(tokens)} tokens, more than this dataset's max_tokens of {max_tokens}",
                hint="shorten the statement (an IN list or an OR chain of thousands of terms); an "
                "administrator can raise [datasets.NAME.limits] max_tokens",
            )
        trees = dialect.parser().parse(_client_tokens(tokens, sql), sql)
    except ParseError as error:
        raise QuerySyntaxError(
            _describe(error), position=_position(sql, error), hint="check the SQL near the position shown"
        ) from None
    except TokenError as error:
        raise QuerySyntaxError(f"syntax error: {error}") from None
    except ValueError as error:  # sqlglot's parser rejects some text this way, e.g. SET a = "" (empty name)
        raise QuerySyntaxError(
            f"syntax error: {error}",
            hint="check the SQL: a double-quoted name cannot be empty (strings take single quotes)",
        ) from None
    except RecursionError:
        raise too_deep() from None
    return [tree for tree in trees if tree is not None]


_STATEMENT_COMMANDS = frozenset({"MOVE", "CLOSE"})  # cursor commands sqlglot does not know


def _client_tokens(tokens: list[Token], sql: str) -> list[Token]:
    """Two PostgreSQL forms sqlglot does not read, adjusted token by token (never in a query's body):

    * ``MOVE …`` and ``CLOSE …`` at the start of a statement become generic commands, as the tokenizer
      makes FETCH (the keyword, then the rest of the statement as one string), while ``close`` stays an
      ordinary name anywhere else (a column of stock prices);
    * ``COPY … TO STDOUT (FORMAT csv)``: the option list without ``WITH``, which sqlglot only reads after a
      ``WITH``; the word is inserted between STDOUT and the parenthesis of a COPY statement."""
    out: list[Token] = []
    statement_start = 0
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token.token_type == TokenType.SEMICOLON:
            statement_start = len(out) + 1
        elif len(out) == statement_start and token.text.upper() in _STATEMENT_COMMANDS:
            end = index + 1
            while end < len(tokens) and tokens[end].token_type != TokenType.SEMICOLON:
                end += 1
            out.append(Token(TokenType.COMMAND, token.text, token.line, token.col, token.start, token.end))
            if end > index + 1:
                first, last = tokens[index + 1], tokens[end - 1]
                text = sql[first.start : last.end + 1]
                out.append(Token(TokenType.STRING, text, first.line, first.col, first.start, last.end))
            index = end
            continue
        elif (
            token.token_type == TokenType.L_PAREN
            and index > 0
            and tokens[index - 1].text.upper() == "STDOUT"
            and len(out) > statement_start
            and out[statement_start].text.upper() == "COPY"
        ):
            out.append(Token(TokenType.WITH, "WITH", token.line, token.col, token.start, token.start - 1))
        out.append(token)
        index += 1
    return out


def statement_spans(sql: str) -> list[tuple[int, int]]:
    """The character span of each non-empty statement, split at top-level semicolons as sqlglot's
    parser splits its tokens."""
    spans: list[tuple[int, int]] = []
    first: int | None = None
    last = 0
    for token in _ClientPostgres().tokenize(sql):
        if token.token_type == TokenType.SEMICOLON:
            if first is not None:
                spans.append((first, last + 1))
            first = None
            continue
        first = token.start if first is None else first
        last = token.end
    if first is not None:
        spans.append((first, last + 1))
    return spans


def too_deep() -> ProgramLimitExceededError:
    """What PostgreSQL answers a statement nested deeper than its stack allows (54001): sqlglot's
    recursive parser and Veil's passes run out of Python's stack first."""
    return ProgramLimitExceededError(
        "statement is nested too deeply",
        hint="flatten the expression (fewer nested parentheses, subqueries or CASEs)",
    )


def _describe(error: ParseError) -> str:
    first = error.errors[0] if error.errors else {}
    near = first.get("highlight")
    return f'syntax error at or near "{near}"' if near else "syntax error"


def _position(sql: str, error: ParseError) -> int | None:
    """1-based character offset, as PostgreSQL reports it in the ErrorResponse ``P`` field."""
    if not error.errors:
        return None
    first = error.errors[0]
    line, column = first.get("line"), first.get("col")
    if not line or not column:
        return None
    lines = sql.splitlines(keepends=True)
    offset = sum(len(text) for text in lines[: line - 1])
    highlight = first.get("highlight") or ""
    return max(1, offset + column - len(highlight) + 1)
