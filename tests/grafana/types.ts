// The type deploy/grafana/caudal.json must have: Grafana's published dashboard model
// (@grafana/schema's Dashboard), its panels rows or time series whose options and field config
// are the time series panel's own types, as JSON spells it. schema.sh writes the dashboard as
// a constant of this type and runs tsc on it: a field Grafana does not know, a value of the
// wrong type or a required field missing is a compile error.
import type { Dashboard, FieldConfigSource, Panel, RowPanel } from "@grafana/schema";
import type {
  FieldConfig as TimeSeriesFieldConfig,
  Options as TimeSeriesOptions,
} from "@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen";

// A type as JSON spells it: a string enum's members as their strings.
type Json<T> = T extends string
  ? `${T}`
  : T extends number | boolean | null | undefined
    ? T
    : T extends ReadonlyArray<infer U>
      ? Array<Json<U>>
      : T extends object
        ? { [K in keyof T]: Json<T[K]> }
        : T;

type TimeSeriesPanel = Omit<Panel, "type" | "options" | "fieldConfig"> & {
  type: "timeseries";
  options: TimeSeriesOptions;
  fieldConfig: FieldConfigSource<TimeSeriesFieldConfig>;
};

export type CaudalDashboard = Json<
  Omit<Dashboard, "panels"> & { panels: Array<RowPanel | TimeSeriesPanel> }
>;
