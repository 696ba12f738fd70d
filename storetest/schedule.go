package storetest

// scheduleCases are the conformance cases of the scheduler (Reserve, Cancel).
var scheduleCases []testCase
