package overview

// WaitAddr lets the external test package wait for a started Server's address.
var WaitAddr = waitAddr
