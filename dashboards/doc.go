// Package dashboards generates podslo's Grafana dashboards with the Grafana
// Foundation SDK, as classic dashboard JSON under dashboards_out/ and as the
// Helm chart's ConfigMaps. The objectives, thresholds and selectors come
// from alerts/slos.yaml, or the chart's values.
package dashboards

//go:generate go run ./gen -spec ../alerts/slos.yaml -out dashboards_out -chart ../charts/podslo
