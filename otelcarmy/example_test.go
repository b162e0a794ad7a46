package otelcarmy_test

import (
	"context"
	"errors"
	"log"
	"os"
	"os/signal"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/otelcarmy"
)

// Spans and metrics go to an OpenTelemetry collector over OTLP/HTTP,
// configured by the standard environment variables, which the exporters
// read themselves:
//
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318   # or _TRACES_/_METRICS_ endpoints
//	OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20... # if the collector wants it
//	OTEL_SERVICE_NAME=orders-tools                       # the service's name in the backend
//	OTEL_RESOURCE_ATTRIBUTES=deployment.environment=prod
//	OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0.1
//
// The providers are made global, so the tools' own instrumentation (a
// database driver, an HTTP client) lands in the same traces, and shut
// down last, so that the final spans are sent.
func Example_otlp() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		log.Fatal(err)
	}
	traces, err := otlptracehttp.New(ctx)
	if err != nil {
		log.Fatal(err)
	}
	metrics, err := otlpmetrichttp.New(ctx)
	if err != nil {
		log.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(traces), sdktrace.WithResource(res))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metrics)), sdkmetric.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	defer func() {
		if err := errors.Join(tp.Shutdown(context.Background()), mp.Shutdown(context.Background())); err != nil {
			log.Print(err)
		}
	}()

	if err := carmy.App().Use(otelcarmy.Middleware()).Run(ctx); err != nil {
		log.Print(err)
	}
}
