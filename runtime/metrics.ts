// Prometheus metrics (prom-client). Several controllers or informers of one process share one
// Registry and therefore one metric per name, told apart by labels (controller-runtime's layout);
// these helpers return the metric already registered under a name instead of failing on the
// second registration.
import { Counter, Gauge, Histogram, type Registry } from "prom-client";

interface MetricConfig<L extends string> {
  name: string;
  help: string;
  labelNames: readonly L[];
}

function existing<M>(registry: Registry, name: string, kind: abstract new (...args: never[]) => M): M | undefined {
  const found = registry.getSingleMetric(name);
  if (found === undefined) return undefined;
  if (!(found instanceof kind)) throw new TypeError(`metric ${name} is already registered with another type`);
  return found;
}

export function counter<L extends string>(registry: Registry, cfg: MetricConfig<L>): Counter<L> {
  return (
    existing<Counter<L>>(registry, cfg.name, Counter) ??
    new Counter<L>({ ...cfg, labelNames: [...cfg.labelNames], registers: [registry] })
  );
}

export function gauge<L extends string>(registry: Registry, cfg: MetricConfig<L>): Gauge<L> {
  return (
    existing<Gauge<L>>(registry, cfg.name, Gauge) ??
    new Gauge<L>({ ...cfg, labelNames: [...cfg.labelNames], registers: [registry] })
  );
}

export function histogram<L extends string>(
  registry: Registry,
  cfg: MetricConfig<L> & { buckets: number[] },
): Histogram<L> {
  return (
    existing<Histogram<L>>(registry, cfg.name, Histogram) ??
    new Histogram<L>({ ...cfg, labelNames: [...cfg.labelNames], registers: [registry] })
  );
}

type CollectHook<L extends string> = (g: Gauge<L>) => void | Promise<void>;
const collectHooks = new WeakMap<Gauge<string>, Set<CollectHook<string>>>();

/**
 * A gauge whose value is computed at scrape time (e.g. "seconds since the last event"). Each owner
 * (one informer, say) adds its own hook that sets its own label values; the returned function
 * removes the hook again. A failing hook is skipped so one owner cannot break the scrape.
 */
export function collectedGauge<L extends string>(
  registry: Registry,
  cfg: MetricConfig<L>,
  hook: CollectHook<L>,
): () => void {
  let g = existing<Gauge<L>>(registry, cfg.name, Gauge);
  if (g === undefined) {
    const hooks = new Set<CollectHook<string>>();
    g = new Gauge<L>({
      ...cfg,
      labelNames: [...cfg.labelNames],
      registers: [registry],
      async collect() {
        await Promise.all([...hooks].map(async (h) => h(this as Gauge<string>)).map((p) => p.catch(() => {})));
      },
    });
    collectHooks.set(g as Gauge<string>, hooks);
  }
  const hooks = collectHooks.get(g as Gauge<string>);
  if (hooks === undefined) throw new TypeError(`gauge ${cfg.name} is registered but not as a collected gauge`);
  hooks.add(hook as CollectHook<string>);
  return () => hooks.delete(hook as CollectHook<string>);
}
