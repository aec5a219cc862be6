"""Budget and key alerts: evaluated off the request path, claimed once for the fleet, POSTed to webhooks."""
