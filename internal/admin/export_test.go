package admin

import "github.com/sluicerate/sluice/internal/inspect"

// The admin API's answers and bounds, for the tests of package admin_test,
// which run a whole server.
type (
	RatesJSON     = ratesJSON
	DeniedJSON    = deniedJSON
	DeniedKeyJSON = deniedKeyJSON
	InspectJSON   = inspect.Report
	ConfigJSON    = configJSON
	HealthJSON    = healthJSON
	LeasesJSON    = leasesJSON
	BudgetsJSON   = budgetsJSON
)

const (
	DeniedPerRule = deniedPerRule
	DeniedStale   = deniedStale
	SlicesShown   = slicesShown
)
