// The status page: one HTML document with its style and script inline, no external asset and
// no build step. The script polls /v1/status and draws what it reads with textContent only (an
// identity is never parsed as HTML); the Content-Security-Policy allows exactly this script and
// this style, by hash.
#include <openssl/evp.h>

#include <string>
#include <string_view>

#include "server/status_page.h"

namespace caudal {
namespace {

constexpr std::string_view kStyle = R"css(
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 auto; max-width: 1100px; padding: 16px;
       color: #1d1d1f; background: #fafafa; }
h1 { font-size: 20px; margin: 0 0 12px; } h2 { font-size: 16px; margin: 20px 0 8px; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; }
.card { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 10px 14px;
        min-width: 150px; }
.card .v { font-size: 22px; font-weight: 600; } .card .k { color: #666; font-size: 12px; }
.ok { color: #1a7f37; } .bad { color: #c62828; } .muted { color: #777; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { border-bottom: 1px solid #e5e5e5; padding: 5px 8px; text-align: left;
         vertical-align: top; white-space: pre-line; }
th { background: #f0f0f0; font-weight: 600; } td.n, th.n { text-align: right;
     font-variant-numeric: tabular-nums; }
#error { background: #fdecea; border: 1px solid #c62828; padding: 8px; margin-bottom: 12px; }
#chart { max-width: 100%; border: 1px solid #ddd; background: #fff; margin-top: 8px; }
code { font-size: 12px; }
)css";

constexpr std::string_view kScript = R"js(
'use strict';
const $ = (id) => document.getElementById(id);
const kPollMs = 2000;
let previous = null;  // the last poll: {at, allowed, denied, policies: {name: {allowed, denied}}}
let polls = 0;
let chartChoices = '';

function td(tr, value, className) {
  const cell = document.createElement('td');
  cell.textContent = String(value);
  if (className) cell.className = className;
  tr.appendChild(cell);
  return cell;
}

function perSecond(now, before, seconds) {
  if (before === undefined || seconds <= 0) return '…';
  return ((now - before) / seconds).toFixed(1);
}

function renderStore(store) {
  $('store-kind').textContent = store.kind;
  $('store-ready').textContent = store.ready ? 'ready' : 'not ready';
  $('store-ready').className = 'v ' + (store.ready ? 'ok' : 'bad');
  $('store-reason').textContent = store.ready ? '' : store.reason;
  $('store-breaker').textContent = store.breaker;
  $('store-breaker').className = 'v ' + (store.breaker === 'closed' ? 'ok' : 'bad');
  $('store-on-failure').textContent = (store.on_failure || '–') +
      (store.instances > 1 ? ' (' + store.instances + ' instances)' : '');
}

function renderPolicies(status, seconds) {
  const body = $('policies').tBodies[0];
  body.replaceChildren();
  let allowed = 0, denied = 0;
  const now = {};
  for (const p of status.policies) {
    allowed += p.allowed; denied += p.denied;
    now[p.name] = {allowed: p.allowed, denied: p.denied};
    const before = previous ? previous.policies[p.name] : undefined;
    const tr = document.createElement('tr');
    tr.dataset.policy = p.name;
    td(tr, p.name + (p.shadow ? ' (shadow)' : ''));
    td(tr, p.identity.join(', '));
    td(tr, p.limits.join('\n'));
    td(tr, p.on_failure);
    td(tr, p.allowed, 'n allowed');
    td(tr, p.denied, 'n denied');
    td(tr, perSecond(p.allowed + p.denied, before && before.allowed + before.denied, seconds),
       'n decision-rate');
    td(tr, perSecond(p.denied, before && before.denied, seconds), 'n refusal-rate');
    td(tr, p.fail_open + p.fail_closed + p.local, 'n');
    td(tr, p.units.map((u) => u.dimension + ' ' + u.admitted).join('\n'), 'units');
    td(tr, p.rlqs.allowed + ' / ' + p.rlqs.denied, 'n rlqs');
    body.appendChild(tr);
  }
  $('total-decisions').textContent = String(allowed + denied);
  $('total-refusals').textContent = String(denied);
  $('rate-decisions').textContent =
      perSecond(allowed + denied, previous && previous.allowed + previous.denied, seconds);
  $('rate-refusals').textContent = perSecond(denied, previous && previous.denied, seconds);
  return {allowed, denied, policies: now};
}

function renderRefused(refused) {
  const body = $('refused').tBodies[0];
  body.replaceChildren();
  for (const check of refused) {
    for (const h of check.top) {
      const tr = document.createElement('tr');
      td(tr, check.check);
      td(tr, h.identity);
      td(tr, h.count, 'n');
      td(tr, h.error, 'n');
      td(tr, check.refused, 'n');
      body.appendChild(tr);
    }
  }
  $('refused-none').hidden = refused.length > 0;
}

function renderChartChoices(policies) {
  const choices = policies.map((p) => p.name + '\t' + p.limits.join('\t')).join('\n');
  if (choices === chartChoices) return;
  chartChoices = choices;
  const select = $('chart-limit');
  const kept = select.value;
  select.replaceChildren();
  for (const p of policies) {
    p.limits.forEach((limit, i) => {
      const option = document.createElement('option');
      option.value = 'policy=' + encodeURIComponent(p.name) + '&limit=' + i;
      option.textContent = p.name + ': ' + limit;
      select.appendChild(option);
    });
  }
  if ([...select.options].some((o) => o.value === kept)) select.value = kept;
  showChart();
}

async function showChart() {
  const select = $('chart-limit');
  if (!select.value) return;
  const url = '/v1/status/chart?' + select.value;
  $('chart-error').textContent = '';
  const r = await fetch(url, {cache: 'no-store'});
  if (!r.ok) {
    const problem = await r.json().catch(() => ({}));
    $('chart').hidden = true;
    $('chart-error').textContent = problem.error ? problem.error.message : 'HTTP ' + r.status;
    return;
  }
  $('chart').hidden = false;
  $('chart').src = url;
}

async function poll() {
  try {
    const r = await fetch('/v1/status', {cache: 'no-store'});
    if (!r.ok) throw new Error('HTTP ' + r.status);
    const status = await r.json();
    const at = performance.now();
    const seconds = previous ? (at - previous.at) / 1000 : 0;
    renderStore(status.store);
    const totals = renderPolicies(status, seconds);
    renderRefused(status.refused);
    renderChartChoices(status.policies);
    previous = Object.assign(totals, {at});
    polls += 1;
    $('updated').textContent = 'updated ' + new Date().toLocaleTimeString() + ' (poll ' + polls +
        ', every ' + kPollMs / 1000 + ' s)';
    $('error').hidden = true;
  } catch (e) {
    $('error').textContent = 'cannot read /v1/status: ' + e.message;
    $('error').hidden = false;
  }
  setTimeout(poll, kPollMs);
}

$('chart-limit').addEventListener('change', showChart);
poll();
)js";

constexpr std::string_view kHead = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>caudal status</title>
<style>)html";

constexpr std::string_view kBody = R"html(</style>
</head>
<body>
<h1>caudal status</h1>
<div id="error" hidden></div>
<div class="cards">
  <div class="card"><div class="k">store</div><div class="v" id="store-kind">…</div></div>
  <div class="card"><div class="k">store health</div><div class="v" id="store-ready">…</div>
    <div class="k" id="store-reason"></div></div>
  <div class="card"><div class="k">circuit breaker</div><div class="v" id="store-breaker">…</div></div>
  <div class="card"><div class="k">failure mode (default)</div>
    <div class="v" id="store-on-failure">…</div></div>
  <div class="card"><div class="k">decisions / s</div><div class="v" id="rate-decisions">…</div>
    <div class="k">total <span id="total-decisions">…</span></div></div>
  <div class="card"><div class="k">refusals / s</div><div class="v" id="rate-refusals">…</div>
    <div class="k">total <span id="total-refusals">…</span></div></div>
</div>
<p class="muted" id="updated">loading…</p>
<h2>Policies</h2>
<table id="policies">
  <thead><tr><th>policy</th><th>identity</th><th>limits</th><th>on failure</th><th class="n">allowed</th>
    <th class="n">refused</th><th class="n">decisions/s</th><th class="n">refusals/s</th>
    <th class="n">by failure mode</th><th>units admitted</th>
    <th class="n">RLQS allowed / refused</th></tr></thead>
  <tbody></tbody>
</table>
<h2>Most refused identities</h2>
<table id="refused">
  <thead><tr><th>policy or rule</th><th>identity</th><th class="n">refused (at most)</th><th class="n">error</th>
    <th class="n">policy total</th></tr></thead>
  <tbody></tbody>
</table>
<p class="muted" id="refused-none">nobody refused yet</p>
<h2>Simulated chart of a limit</h2>
<p class="muted">Every algorithm with this limit's rate and burst, over the fixed window's worst
case (a burst on each side of a window boundary, then twice the rate): the most one key had
admitted in any window.</p>
<select id="chart-limit"></select>
<p class="bad" id="chart-error"></p>
<img id="chart" alt="simulated chart of the chosen limit" hidden>
<script>)html";

constexpr std::string_view kTail = R"html(</script>
</body>
</html>
)html";

std::string Sha256Base64(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr);
  unsigned char encoded[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
  const int n = EVP_EncodeBlock(encoded, digest, static_cast<int>(size));
  return std::string(reinterpret_cast<const char*>(encoded), static_cast<size_t>(n));
}

}  // namespace

std::string_view StatusPageHtml() {
  static const std::string html = std::string(kHead) + std::string(kStyle) + std::string(kBody) +
                                  std::string(kScript) + std::string(kTail);
  return html;
}

const std::string& StatusPageCsp() {
  static const std::string csp =
      "default-src 'none'; script-src 'sha256-" + Sha256Base64(kScript) + "'; style-src 'sha256-" +
      Sha256Base64(kStyle) +
      "'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; "
      "frame-ancestors 'none'";
  return csp;
}

}  // namespace caudal
