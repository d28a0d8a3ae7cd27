// Validates deploy/kubernetes/ (tests/deploy): every manifest against the Kubernetes API's
// schemas (kubernetes-models, generated from Kubernetes' OpenAPI), then what the manifests must
// agree on: probes, security context, resources, the grace period against
// server.shutdown_timeout, selectors and ports, the mounts against the config's paths, and the
// Envoy fragment against the Services. caudal's config and Envoy files from the ConfigMaps are
// checked by `caudal validate`, laid out as the pod mounts them.
//   node validate.mjs DEPLOY_KUBERNETES_DIR CAUDAL_BINARY
import { execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, parseAllDocuments, stringify } from "yaml";
import { Deployment } from "kubernetes-models/apps/v1";
import { ConfigMap, Service } from "kubernetes-models/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";

const [dir, caudal] = process.argv.slice(2);
const MODELS = {
  "apps/v1/Deployment": Deployment,
  "v1/Service": Service,
  "v1/ConfigMap": ConfigMap,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
};
let failures = 0;
let passed = 0;
function check(ok, what) {
  if (ok) passed++;
  else {
    failures++;
    console.log("FAIL: " + what);
  }
}

// Every document of every manifest, validated.
const objects = [];
for (const file of readdirSync(dir).filter((f) => f.endsWith(".yaml")).sort()) {
  for (const doc of parseAllDocuments(readFileSync(join(dir, file), "utf8"))) {
    const object = doc.toJS();
    const Model = MODELS[`${object.apiVersion}/${object.kind}`];
    check(Model !== undefined, `${file}: ${object.apiVersion} ${object.kind} is not a kind checked here`);
    if (!Model) continue;
    try {
      new Model(object).validate();
      check(true);
    } catch (e) {
      check(false, `${file}: ${object.kind} ${object.metadata?.name}: ${e.message}`);
    }
    objects.push(object);
  }
}
const find = (kind, name) => objects.find((o) => o.kind === kind && (!name || o.metadata.name === name));
const deployment = find("Deployment", "caudal");
const pod = deployment.spec.template.spec;
const container = pod.containers[0];
const labels = deployment.spec.template.metadata.labels;
const matches = (selector) =>
  Object.entries(selector).every(([k, v]) => labels[k] === v) && Object.keys(selector).length > 0;

// Probes, security, resources.
check(container.livenessProbe?.httpGet?.path === "/healthz", "liveness probe on /healthz");
check(container.readinessProbe?.httpGet?.path === "/readyz", "readiness probe on /readyz");
check(container.startupProbe?.grpc?.port === 8081, "startup probe on gRPC health (8081)");
check(pod.securityContext?.runAsNonRoot === true, "runAsNonRoot");
check(container.securityContext?.readOnlyRootFilesystem === true, "readOnlyRootFilesystem");
check(container.securityContext?.allowPrivilegeEscalation === false, "no privilege escalation");
check(container.resources?.requests?.cpu && container.resources?.limits?.memory, "resources");

// The grace period covers the preStop pause, the shutdown timeout and the second after it.
const config = parse(find("ConfigMap", "caudal-config").data["caudal.yaml"]);
const seconds = (d) => ({ ms: 1e-3, s: 1, m: 60 })[d.match(/[a-z]+$/)[0]] * parseFloat(d);
const pause = container.lifecycle?.preStop?.sleep?.seconds ?? 0;
const needed = pause + seconds(config.server.shutdown_timeout ?? "10s") + 1;
check(pod.terminationGracePeriodSeconds > needed,
      `terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} > ${needed}`);

// Selectors and ports.
const ports = new Map(container.ports.map((p) => [p.name, p.containerPort]));
for (const service of objects.filter((o) => o.kind === "Service")) {
  check(matches(service.spec.selector), `Service ${service.metadata.name} selects the pods`);
  for (const p of service.spec.ports) {
    check(ports.has(p.targetPort), `Service ${service.metadata.name}: port ${p.targetPort}`);
  }
}
check(matches(find("PodDisruptionBudget").spec.selector.matchLabels), "the PDB selects the pods");
check(ports.get("http") === Number(config.server.http.split(":").pop()), "server.http's port");
check(ports.get("grpc") === Number(config.server.grpc.split(":").pop()), "server.grpc's port");

// The mounts hold the files the config names.
const mountOf = (name) => container.volumeMounts.find((m) => m.name === name)?.mountPath;
const volumeMap = (name) => pod.volumes.find((v) => v.name === name)?.configMap?.name;
const configArg = container.args[container.args.indexOf("--config") + 1];
check(configArg === `${mountOf("config")}/caudal.yaml`, "--config is in the config mount");
check(volumeMap("config") === "caudal-config", "the config volume is caudal-config");
check(config.envoy_config === mountOf("ratelimit"), "envoy_config is the ratelimit mount");
check(volumeMap("ratelimit") === "caudal-ratelimit", "the ratelimit volume is caudal-ratelimit");

// caudal itself checks the config and the Envoy files, laid out as mounted.
const root = mkdtempSync(join(tmpdir(), "caudal-k8s-"));
try {
  const envoyDir = join(root, "ratelimit");
  mkdirSync(envoyDir);
  const domains = [];
  for (const [name, text] of Object.entries(find("ConfigMap", "caudal-ratelimit").data)) {
    writeFileSync(join(envoyDir, name), text);
    domains.push(parse(text).domain);
  }
  writeFileSync(join(root, "caudal.yaml"), stringify({ ...config, envoy_config: envoyDir }));
  try {
    execFileSync(caudal, ["validate", "--config", join(root, "caudal.yaml")], { stdio: "pipe" });
    check(true);
  } catch (e) {
    check(false, `caudal validate: ${e.stdout}${e.stderr}`);
  }

  // The Envoy fragment points at the headless Service's port and serves a configured domain.
  const envoy = parse(readFileSync(join(dir, "envoy", "ratelimit-filter.yaml"), "utf8"));
  const cluster = envoy.static_resources.clusters.find((c) => c.name === "caudal_rls");
  const address = cluster.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address;
  const rls = find("Service", "caudal-rls");
  check(rls.spec.clusterIP === "None", "caudal-rls is headless");
  check(address.socket_address.address.split(".")[0] === "caudal-rls", "Envoy resolves caudal-rls");
  check(address.socket_address.port_value === rls.spec.ports[0].port, "Envoy's port is caudal-rls's");
  const hcm = envoy.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const filter = hcm.http_filters.find((f) => f.name === "envoy.filters.http.ratelimit");
  check(domains.includes(filter.typed_config.domain), "Envoy's domain is in caudal-ratelimit");
} finally {
  rmSync(root, { recursive: true, force: true });
}

console.log(`${passed} passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
