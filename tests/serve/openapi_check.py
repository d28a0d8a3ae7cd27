"""Holds live responses to docs/openapi.json: the harness hands every response it receives to
check(), which finds the documented operation and response for it and validates the status, the
headers and the body against the document's schemas with Debian's python3-jsonschema (JSON
Schema 2020-12, OpenAPI 3.1's dialect). A response the document does not describe fails the test
that received it. seen() tells which documented responses this process has checked, so a test
can prove that every one of them was met at least once."""
import json
import os
import re
import warnings

import jsonschema

DOCUMENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                        "openapi.json")
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
JSON_MEDIA = re.compile(r"^application/([a-z.+-]+\+)?json$")


def load():
    with open(DOCUMENT, "rb") as f:
        return json.loads(f.read())


class Document:
    def __init__(self, doc):
        self.doc = doc
        with warnings.catch_warnings():  # newer jsonschema prefers `referencing`; Debian's has not
            warnings.simplefilter("ignore", DeprecationWarning)
            self._resolver = jsonschema.RefResolver("", doc)
        self._seen = set()
        self._templates = []
        for template in doc["paths"]:
            pattern = re.escape(template)
            pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", pattern)
            # Fixed paths before templated ones, so /v1/status never reads as /v1/{x}.
            self._templates.append(("{" in template, template, re.compile(pattern + "$")))
        self._templates.sort(key=lambda t: t[0])

    def deref(self, node):
        while isinstance(node, dict) and "$ref" in node:
            _, node = self._resolver.resolve(node["$ref"])
        return node

    def validate(self, instance, schema, what):
        validator = jsonschema.Draft202012Validator(schema, resolver=self._resolver)
        e = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        if e is not None:
            raise AssertionError("%s does not match docs/openapi.json: %s at %s (schema %s)\n%r" % (
                what, e.message, "/".join(map(str, e.absolute_path)) or "the top",
                "/".join(map(str, e.absolute_schema_path)), instance))

    def operation(self, method, path):
        """(the seen() key's path and method, the operation or None) for a request."""
        for _, template, pattern in self._templates:
            if not pattern.match(path):
                continue
            item = self.doc["paths"][template]
            m = method.lower()
            if m not in item and m == "head" and "get" in item:
                m = "get"  # HEAD answers as GET does, without the body
            if m not in item and "x-caudal-any-method" in item:
                m = item["x-caudal-any-method"]
            if m not in item:
                return (template, "other"), None
            return (template, m), item[m]
        return ("*", "any"), None

    def response_for(self, method, path, status):
        key, op = self.operation(method, path)
        if op is None:
            # A known path may be off (the status page's, the admin API's): 404 for any method.
            codes = ("404",) if key[0] == "*" else ("405", "404")
            responses = self.doc["x-caudal-unrouted"]["responses"]
            code = str(status)
            if code not in codes:
                raise AssertionError("%s %s: %d, where docs/openapi.json says %s" % (
                    method, path, status, " or ".join(codes)))
        else:
            responses = op["responses"]
            code = str(status)
            if code not in responses:
                code = "%dXX" % (status // 100)
            if code not in responses:
                raise AssertionError(
                    "%s %s: status %d is not documented for %s %s (documented: %s)" % (
                        method, path, status, key[1], key[0], ", ".join(responses)))
        return key + (code,), self.deref(responses[code])

    def check(self, method, target, status, headers, body):
        """Raises AssertionError unless the response is one docs/openapi.json describes.
        `headers`: lower-case names → values; `body`: bytes."""
        path = target.split("?", 1)[0]
        key, spec = self.response_for(method, path, status)
        what = "%s %s → %d" % (method, target[:120], status)
        for name, header in (spec.get("headers") or {}).items():
            header = self.deref(header)
            value = headers.get(name.lower())
            if value is None:
                if header.get("required"):
                    raise AssertionError("%s: header %s missing" % (what, name))
                continue
            schema = self.deref(header["schema"])
            if schema.get("type") == "integer":
                if not re.fullmatch(r"[0-9]+", value):
                    raise AssertionError("%s: header %s: %r is not an integer" % (
                        what, name, value))
                value = int(value)
            self.validate(value, schema, "%s: header %s" % (what, name))
        content = spec.get("content")
        content_type = headers.get("content-type")
        if not content:
            if body or content_type:
                raise AssertionError("%s: documented without a body, got %r (%r)" % (
                    what, content_type, body[:200]))
            self._seen.add(key)
            return
        if content_type is None:
            raise AssertionError("%s: no Content-Type (documented: %s)" % (
                what, ", ".join(content)))
        media = content.get(content_type)
        if media is None:
            raise AssertionError("%s: Content-Type %r is not documented (documented: %s)" % (
                what, content_type, ", ".join(content)))
        if method.upper() == "HEAD":
            if body:
                raise AssertionError("%s: a body in answer to HEAD" % what)
        else:
            essence = content_type.split(";")[0].strip()
            text = body.decode("utf-8")
            instance = json.loads(text) if JSON_MEDIA.match(essence) else text
            self.validate(instance, self.deref(media["schema"]), what + " (" + essence + ")")
        self._seen.add(key)

    def seen(self):
        """The (path, method, status) triples of the document checked so far in this process."""
        return set(self._seen)

    def documented(self):
        """Every (path, method, status) the document describes, and the unrouted answers."""
        out = {("*", "any", "404")}
        for template, item in self.doc["paths"].items():
            for m in METHODS:
                if m in item:
                    out.update((template, m, code) for code in item[m]["responses"])
            if "x-caudal-any-method" not in item:
                out.add((template, "other", "405"))
        return out


_document = None


def document():
    global _document
    if _document is None:
        _document = Document(load())
    return _document


def check(method, target, status, headers, body):
    document().check(method, target, status, headers, body)
