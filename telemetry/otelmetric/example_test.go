package otelmetric_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/telemetry/otelmetric"
)

// The library's metrics through the OpenTelemetry SDK, read back here by a
// manual reader; a service exports them with a periodic reader over its
// exporter (OTLP, say) instead.
func Example() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())

	metrics, err := otelmetric.New(provider, otelmetric.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	// A service passes metrics as the Metrics of timers.SchedulerConfig,
	// relay.HandlerConfig and outcome.DeliveryConfig; here, two samples as
	// the scheduler and outcome delivery emit them.
	metrics.Add(telemetry.MetricSchedulerTicks, nil, 1)
	metrics.Gauge(telemetry.MetricOutboxBacklogBytes, []telemetry.Label{{Name: telemetry.LabelPartitionKind, Value: "ref"}}, 512)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				p := data.DataPoints[0]
				lines = append(lines, fmt.Sprintf("%s [%s] sum{%s} %d (monotonic %v)", m.Name, m.Unit, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value, data.IsMonotonic))
			case metricdata.Gauge[float64]:
				p := data.DataPoints[0]
				lines = append(lines, fmt.Sprintf("%s [%s] gauge{%s} %g", m.Name, m.Unit, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value))
			}
		}
	}
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// mkitfdb_outbox_backlog_bytes [By] gauge{partition_kind=ref} 512
	// mkitfdb_scheduler_ticks_total [{tick}] sum{} 1 (monotonic true)
}
