// Command wordcount serves the example WordCount tool as an aimon-gw plugin.
package main

import (
	"aimon.dev/gw/examples/plugins/wordcount"
	"aimon.dev/gw/plugin"
)

func main() {
	plugin.Serve(wordcount.Tool(plugin.Logger()))
}
