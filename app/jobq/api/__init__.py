"""HTTP: routes, request/response schemas, problem+json. ``create_app`` wires everything."""
