package timers_test

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mkit-dev/mkitfdb/timers"
)

// A Tick's report sums every count of its runs' reports: a count added to
// Report and forgotten in the sum fails here.
func TestATicksReportSumsEveryCount(t *testing.T) {
	var one timers.Report
	v := reflect.ValueOf(&one).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Int {
			f.SetInt(1)
		}
	}
	sum := reflect.ValueOf(timers.AddReports(one, one))
	for i := range sum.NumField() {
		if f := sum.Field(i); f.Kind() == reflect.Int {
			assert.EqualValues(t, 2, f.Int(), "Report.%s", sum.Type().Field(i).Name)
		}
	}
}
