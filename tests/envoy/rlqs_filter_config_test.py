#!/usr/bin/env python3
"""docs/envoy.md's Envoy RLQS configuration, parsed through the filter's own schema.

Every YAML block of docs/envoy.md marked with the HTML comment <!-- envoy-rlqs-config --> right
before its fence is Envoy configuration (clusters, http_filters). Each rate_limit_quota filter's
typed_config is parsed with google.protobuf.json_format.ParseDict into
envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig, which refuses unknown
fields; the Any values inside (the matcher's inputs and actions) are resolved by their @type
against the same generated messages. Then the facts caudal's RLQS server relies on are checked:
the BucketId the matcher builds for a request, the domain, and the settings the filter honours.

The caudal side is a YAML block of the same document with a top-level `rlqs:` key; until the
document has one, the shape caudal's RLQS configuration is written in (EXPECTED_CAUDAL_RLQS) stands
in for it.

Messages come from protoc --python_out at test time over tests/envoy/rlqs_filter_proto (a
test-only proto root) and caudal's proto/. Paths arrive in the environment: RLQS_FILTER_PROTO_ROOT,
RLS_PROTO_ROOT, PROTOC, PROTOBUF_INCLUDE (set by CTest).
"""
import atexit
import copy
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "..", "..", "docs", "envoy.md")
MARKER = "<!-- envoy-rlqs-config -->"

TYPE_PREFIX = "type.googleapis.com/"
FILTER_NAME = "envoy.filters.http.rate_limit_quota"
FILTER_CONFIG = "envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig"
BUCKET_SETTINGS = "envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings"
HEADER_INPUT = "envoy.type.matcher.v3.HttpRequestHeaderMatchInput"

# The caudal configuration the documented Envoy example is written for (docs/envoy.md, RLQS).
EXPECTED_CAUDAL_RLQS = {
    "domains": [{
        "domain": "envoy",
        "buckets": [{"match": {"name": "per-tenant"}, "policy": "per-tenant",
                     "identity": {"tenant": "tenant"}}],
        "no_match": "deny_all",
    }],
}

# The filter reports on this interval whatever the bucket settings say.
ENVOY_REPORT_INTERVAL_S = 5

TMP = tempfile.mkdtemp(prefix="caudal-rlqs-filter-")
atexit.register(shutil.rmtree, TMP, ignore_errors=True)


def generate_messages():
    roots = [os.environ["RLQS_FILTER_PROTO_ROOT"], os.environ["RLS_PROTO_ROOT"]]
    protos = []
    for root in roots:
        protos += sorted(os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
                         for d, _, files in os.walk(root) for f in files if f.endswith(".proto"))
        if root == roots[0]:
            n_filter = len(protos)
    includes = [f"-I{r}" for r in roots]
    includes += [f"-I{p}" for p in os.environ.get("PROTOBUF_INCLUDE", "").split(";") if p]
    subprocess.run([os.environ["PROTOC"], *includes, f"--python_out={TMP}", *protos], check=True)
    sys.path.insert(0, TMP)
    # The filter root's modules, which import what they use from proto/ (proto/'s grpc/health
    # would shadow the installed grpc package, and nothing here needs it).
    for rel in protos[:n_filter]:
        importlib.import_module(rel[:-len(".proto")].replace("/", ".") + "_pb2")
    return [m for name, m in sorted(sys.modules.items()) if name.endswith("_pb2")
            and getattr(m, "__file__", "") and m.__file__.startswith(TMP)]


def message_classes(modules):
    """Full name -> generated class, nested messages included."""
    classes = {}

    def add(cls):
        classes[cls.DESCRIPTOR.full_name] = cls
        for nested in cls.DESCRIPTOR.nested_types:
            if not nested.GetOptions().map_entry:
                add(getattr(cls, nested.name))

    for module in modules:
        for name in module.DESCRIPTOR.message_types_by_name:
            add(getattr(module, name))
    return classes


MODULES = generate_messages()
CLASSES = message_classes(MODULES)
from google.protobuf import json_format  # noqa: E402  (after the generated modules exist)


def marked_blocks(text):
    """The YAML of every fenced block right after MARKER (blank lines between allowed)."""
    blocks = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j >= len(lines) or lines[j].strip() != "```yaml":
            raise AssertionError(f"{DOC}:{i + 1}: {MARKER} is not followed by a ```yaml fence")
        end = j + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end >= len(lines):
            raise AssertionError(f"{DOC}:{j + 1}: unterminated fence")
        blocks.append((j + 2, yaml.safe_load("\n".join(lines[j + 1:end]))))
    return blocks


def caudal_rlqs_blocks(text):
    """The `rlqs:` sections of the document's YAML blocks (the caudal side), if any."""
    found = []
    for m in re.finditer(r"^```yaml\n(.*?)^```", text, re.S | re.M):
        try:
            doc = yaml.safe_load(m.group(1))
        except yaml.YAMLError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("rlqs"), dict):
            found.append(doc["rlqs"])
    return found


def type_name(type_url):
    assert type_url.startswith(TYPE_PREFIX), type_url
    return type_url[len(TYPE_PREFIX):]


def parse_filter_config(typed_config):
    """ParseDict of a filter's typed_config (with its @type) into RateLimitQuotaFilterConfig."""
    body = dict(typed_config)
    if type_name(body.pop("@type", "")) != FILTER_CONFIG:
        raise ValueError(f"typed_config is not a {FILTER_CONFIG}")
    return json_format.ParseDict(body, CLASSES[FILTER_CONFIG](), ignore_unknown_fields=False)


def unpack(any_msg):
    msg = CLASSES[type_name(any_msg.type_url)]()
    assert any_msg.Unpack(msg), any_msg.type_url
    return msg


def walk_anys(msg, out):
    """Every google.protobuf.Any in msg (Any values themselves searched too), in order."""
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            vf = field.message_type.fields_by_name["value"]
            values = list(value.values()) if vf.message_type is not None else []
        elif field.label == field.LABEL_REPEATED:
            values = list(value)
        else:
            values = [value]
        for v in values:
            if v.DESCRIPTOR.full_name == "google.protobuf.Any":
                out.append(v)
                walk_anys(unpack(v), out)
            else:
                walk_anys(v, out)
    return out


def rlqs_filters(block):
    return [f for f in block.get("http_filters", []) if f.get("name") == FILTER_NAME]


def on_matches(matcher):
    """(predicate or None, OnMatch) for every action of a matcher, nested matchers included."""
    found = []
    if matcher.HasField("matcher_list"):
        for fm in matcher.matcher_list.matchers:
            found += on_match_actions(fm.predicate, fm.on_match)
    if matcher.HasField("on_no_match"):
        found += on_match_actions(None, matcher.on_no_match)
    return found


def on_match_actions(predicate, on_match):
    if on_match.HasField("matcher"):
        return on_matches(on_match.matcher)
    return [(predicate, on_match)]


def header_input(typed_extension):
    msg = unpack(typed_extension.typed_config)
    assert msg.DESCRIPTOR.full_name == HEADER_INPUT, msg.DESCRIPTOR.full_name
    return msg.header_name.lower()


def string_matches(matcher, value):
    kind = matcher.WhichOneof("match_pattern")
    if matcher.ignore_case:
        value = value.lower()
    if kind == "safe_regex":
        assert matcher.safe_regex.HasField("google_re2"), "a regex names its engine (google_re2)"
        return re.fullmatch(matcher.safe_regex.regex, value) is not None
    pattern = getattr(matcher, kind)
    pattern = pattern.lower() if matcher.ignore_case else pattern
    return {"exact": value == pattern, "prefix": value.startswith(pattern),
            "suffix": value.endswith(pattern), "contains": pattern in value}[kind]


def predicate_holds(predicate, headers):
    kind = predicate.WhichOneof("match_type")
    if kind == "single_predicate":
        value = headers.get(header_input(predicate.single_predicate.input))
        # No data (an absent header) matches no value matcher.
        return value is not None and string_matches(predicate.single_predicate.value_match, value)
    if kind == "and_matcher":
        return all(predicate_holds(p, headers) for p in predicate.and_matcher.predicate)
    if kind == "or_matcher":
        return any(predicate_holds(p, headers) for p in predicate.or_matcher.predicate)
    return not predicate_holds(predicate.not_matcher, headers)


def bucket_id_for(config, headers):
    """The BucketId Envoy builds for a request with these headers, or None (allowed, uncounted).

    As the filter does: the first matcher whose predicate holds, else on_no_match; a custom value
    with no data fails the id (the request is allowed and not reported), an empty one leaves its
    key out.
    """
    headers = {k.lower(): v for k, v in headers.items()}
    for predicate, on_match in on_matches(config.bucket_matchers):
        if predicate is not None and not predicate_holds(predicate, headers):
            continue
        settings = unpack(on_match.action.typed_config)
        bucket = {}
        for key, builder in settings.bucket_id_builder.bucket_id_builder.items():
            if builder.WhichOneof("value_specifier") == "string_value":
                bucket[key] = builder.string_value
                continue
            value = headers.get(header_input(builder.custom_value))
            if value is None:
                return None
            if value:
                bucket[key] = value
        return bucket
    return None


def caudal_identity(rlqs, domain, bucket_id):
    """(policy, descriptor) caudal's rlqs config gives a BucketId, or None when no entry holds."""
    for d in rlqs["domains"]:
        if d["domain"] != domain:
            continue
        for b in d["buckets"]:
            if all(bucket_id.get(k) == v for k, v in b["match"].items()):
                missing = [k for k in b["identity"].values() if k not in bucket_id]
                assert not missing, f"BucketId {bucket_id} lacks {missing} that {b} maps"
                return b["policy"], {desc: bucket_id[key] for desc, key in b["identity"].items()}
    return None


def duration_seconds(d):
    return d.seconds + d.nanos / 1e9


class RlqsFilterConfigTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(DOC, encoding="utf-8") as f:
            cls.text = f.read()
        cls.blocks = marked_blocks(cls.text)
        cls.caudal = caudal_rlqs_blocks(cls.text) or [EXPECTED_CAUDAL_RLQS]
        cls.configs = []  # (line, block, the filter's typed_config as YAML gave it)
        for line, block in cls.blocks:
            for f in rlqs_filters(block):
                cls.configs.append((line, block, f["typed_config"]))

    def parsed(self):
        out = []
        for line, block, typed_config in self.configs:
            with self.subTest(line=line):
                out.append((line, block, parse_filter_config(typed_config)))
        return out

    def settings(self, config):
        return [(p, unpack(m.action.typed_config)) for p, m in on_matches(config.bucket_matchers)]

    def test_the_document_has_a_marked_rlqs_filter(self):
        self.assertTrue(self.blocks, f"no block marked {MARKER} in {DOC}")
        for line, block in self.blocks:
            self.assertTrue(rlqs_filters(block), f"{DOC}:{line}: no {FILTER_NAME} filter")

    def test_typed_config_parses_and_every_any_resolves(self):
        for line, _, config in self.parsed():
            anys = walk_anys(config, [])
            names = {type_name(a.type_url) for a in anys}
            # The matcher's actions and the header inputs are Any values, all resolved.
            self.assertIn(BUCKET_SETTINGS, names, line)
            self.assertIn(HEADER_INPUT, names, line)
            for predicate, on_match in on_matches(config.bucket_matchers):
                self.assertEqual(type_name(on_match.action.typed_config.type_url), BUCKET_SETTINGS)
                self.assertTrue(on_match.action.name, "a matcher action is named")

    def test_what_envoy_validates(self):
        for line, _, config in self.parsed():
            self.assertEqual(config.rlqs_server.WhichOneof("target_specifier"), "envoy_grpc")
            self.assertTrue(config.rlqs_server.envoy_grpc.cluster_name)
            self.assertTrue(config.domain)
            self.assertTrue(config.HasField("bucket_matchers"))
            for predicate, s in self.settings(config):
                self.assertTrue(s.bucket_id_builder.bucket_id_builder, line)
                for builder in s.bucket_id_builder.bucket_id_builder.values():
                    self.assertIsNotNone(builder.WhichOneof("value_specifier"))
                self.assertTrue(s.HasField("reporting_interval"), line)
                self.assertGreater(duration_seconds(s.reporting_interval), 0.1)
                self.assertLessEqual(len(s.deny_response_settings.response_headers_to_add), 10)
                if predicate is not None:
                    self.assertTrue(predicate.single_predicate.input.name)

    def test_rlqs_server_is_an_http2_cluster_of_the_block(self):
        for line, block, config in self.parsed():
            name = config.rlqs_server.envoy_grpc.cluster_name
            clusters = [c for c in block.get("clusters", []) if c.get("name") == name]
            self.assertEqual(len(clusters), 1, f"{DOC}:{line}: cluster {name} not in the block")
            opts = clusters[0]["typed_extension_protocol_options"][
                "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
            self.assertIn("http2_protocol_options", opts["explicit_http_config"])

    def test_bucket_ids_are_what_caudal_maps(self):
        for line, _, config in self.parsed():
            for rlqs in self.caudal:
                with self.subTest(line=line):
                    self.assertIn(config.domain, [d["domain"] for d in rlqs["domains"]])
                    acme = bucket_id_for(config, {"X-Tenant": "acme"})
                    self.assertEqual(acme, {"name": "per-tenant", "tenant": "acme"})
                    self.assertEqual(caudal_identity(rlqs, config.domain, acme),
                                     ("per-tenant", {"tenant": "acme"}))
                    # Another tenant, another bucket and descriptor.
                    self.assertEqual(caudal_identity(rlqs, config.domain, bucket_id_for(
                        config, {"x-tenant": "globex"})), ("per-tenant", {"tenant": "globex"}))
                    # No header, or an empty one: no bucket, so nothing reaches caudal.
                    self.assertIsNone(bucket_id_for(config, {}))
                    self.assertIsNone(bucket_id_for(config, {"x-tenant": ""}))

    def test_every_matched_request_gets_a_whole_bucket_id(self):
        """A matched request's BucketId has every key of its builder (no key silently left out)."""
        for line, _, config in self.parsed():
            builders = [set(s.bucket_id_builder.bucket_id_builder)
                        for _, s in self.settings(config)]
            for value in ["a", "tenant-with-dashes", "x" * 200]:
                bucket = bucket_id_for(config, {"x-tenant": value})
                self.assertIn(set(bucket), builders, line)
                self.assertEqual(bucket["tenant"], value)

    def test_settings_the_filter_honours(self):
        for line, _, config in self.parsed():
            for _, s in self.settings(config):
                with self.subTest(line=line):
                    self.assertEqual(duration_seconds(s.reporting_interval),
                                     ENVOY_REPORT_INTERVAL_S)
                    # A token bucket here gets no limiter in the filter: blanket rules only.
                    self.assertEqual(
                        s.no_assignment_behavior.fallback_rate_limit.WhichOneof("strategy"),
                        "blanket_rule")
                    e = s.expired_assignment_behavior
                    # Envoy's filter ignores reuse_last_assignment; an unset timeout ends at once.
                    self.assertEqual(e.WhichOneof("expired_assignment_behavior"),
                                     "fallback_rate_limit")
                    self.assertGreaterEqual(e.expired_assignment_behavior_timeout.seconds, 1)
                    self.assertEqual(e.expired_assignment_behavior_timeout.nanos, 0)
                    self.assertEqual(s.deny_response_settings.http_status.code, 429)
            strategies = self.strategies(config)
            self.assertTrue(strategies)
            for strategy in strategies:
                kind = strategy.WhichOneof("strategy")
                self.assertNotEqual(kind, "requests_per_time_unit", "the filter ignores it")
                if kind == "token_bucket":
                    tb = strategy.token_bucket
                    self.assertGreater(tb.max_tokens, 0)
                    # Unset reads 0 in the filter (no refill), not the documented 1.
                    self.assertTrue(tb.HasField("tokens_per_fill"))
                    self.assertGreater(tb.tokens_per_fill.value, 0)
                    # The filter divides by whole seconds.
                    self.assertGreaterEqual(tb.fill_interval.seconds, 1)
                    self.assertEqual(tb.fill_interval.nanos, 0)

    def strategies(self, config):
        out = []
        for _, s in self.settings(config):
            for holder in (s.no_assignment_behavior, s.expired_assignment_behavior):
                if holder.HasField("fallback_rate_limit"):
                    out.append(holder.fallback_rate_limit)
        return out

    def test_the_parse_refuses_what_envoy_would(self):
        """The checks above mean something only if a wrong field fails the parse."""
        self.assertTrue(self.configs)
        _, _, typed_config = self.configs[0]
        parse_filter_config(typed_config)  # the original passes

        misspelt = copy.deepcopy(typed_config)
        misspelt["domian"] = misspelt.pop("domain")
        with self.assertRaises(json_format.ParseError):
            parse_filter_config(misspelt)

        inner = copy.deepcopy(typed_config)
        action = inner["bucket_matchers"]["matcher_list"]["matchers"][0]["on_match"]["action"]
        action["typed_config"]["reporting_intervals"] = "5s"
        with self.assertRaises(json_format.ParseError):
            parse_filter_config(inner)

        unknown = copy.deepcopy(typed_config)
        action = unknown["bucket_matchers"]["matcher_list"]["matchers"][0]["on_match"]["action"]
        action["typed_config"]["@type"] = TYPE_PREFIX + "envoy.extensions.filters.http.NoSuch"
        with self.assertRaises(json_format.ParseError):
            parse_filter_config(unknown)

        with self.assertRaises(ValueError):
            parse_filter_config({**typed_config, "@type": TYPE_PREFIX + BUCKET_SETTINGS})


if __name__ == "__main__":
    unittest.main()
