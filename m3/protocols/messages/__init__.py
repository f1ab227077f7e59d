"""Actor messages: the requests and events that travel between the gateway and the actors."""
